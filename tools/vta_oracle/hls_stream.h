// hls_stream.h: the vta project's own stand-in for Vivado HLS's hls::stream, so that VTA's
// HLS source (hardware/xilinx/src/vta.cc) runs as plain C++ ("C-simulation") under g++.
//
// Only what vta.cc uses: a FIFO with write, read (by value and into a reference), read_nb
// and empty. Streams are unbounded (C-simulation never blocks: vta.cc's main loop checks
// empty() before it reads). For the oracle's driver each element type also counts its writes
// and the elements left unread when a stream is destroyed, so the driver can tell how many
// instructions vta() ran and whether it returned with work left in its queues.
//
// Written for the vta project; not derived from Xilinx's header.
#ifndef VTA_ORACLE_HLS_STREAM_H_
#define VTA_ORACLE_HLS_STREAM_H_

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <deque>

namespace hls {

template <typename T>
class stream {
 public:
  stream() {}
  explicit stream(const char* /*name*/) {}
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() { leftover() += fifo_.size(); }

  void write(const T& value) {
    fifo_.push_back(value);
    ++writes();
  }
  T read() {
    if (fifo_.empty()) {
      std::fprintf(stderr, "hls_stream.h: read from an empty stream (would block forever)\n");
      std::abort();
    }
    T value = fifo_.front();
    fifo_.pop_front();
    return value;
  }
  void read(T& value) { value = read(); }
  bool read_nb(T& value) {
    if (fifo_.empty()) return false;
    value = read();
    return true;
  }
  bool empty() const { return fifo_.empty(); }
  bool full() const { return false; }
  std::size_t size() const { return fifo_.size(); }

  // Counters over every stream of element type T (the oracle's driver reads them).
  static std::size_t& writes() {
    static std::size_t n = 0;
    return n;
  }
  static std::size_t& leftover() {
    static std::size_t n = 0;
    return n;
  }

 private:
  std::deque<T> fifo_;
};

}  // namespace hls

#endif  // VTA_ORACLE_HLS_STREAM_H_
