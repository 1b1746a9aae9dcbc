// driver.cc: the vta project's driver for VTA's HLS design as C-simulation.
//
// Linked with apache/tvm-vta's unmodified hardware/xilinx/src/vta.cc, both compiled against
// Xilinx's open-source ap_int headers and this folder's hls_stream.h / ap_axi_sdata.h
// stand-ins, with the VTA_LOG_* macros of one hardware config (tools/vta_oracle/build.py
// derives them and builds the pair).
//
//   vta_oracle_driver layout          print what the build's hw_spec.h and vta.h define:
//                                      instruction field positions, micro-op fields, sizes
//   vta_oracle_driver run MANIFEST    run one program through vta() (manifest format below)
//
// Manifest, one directive per line (paths may not contain spaces):
//   image BYTES                the DRAM image's size in bytes (zero-filled)
//   fill BYTE                  the byte vta()'s stack starts with (its inp/wgt/out buffers
//                              are uninitialised locals; 0 = a freshly configured FPGA)
//   insns COUNT PATH           COUNT 16-byte instruction words
//   load OFFSET PATH           copy the file into the image at byte OFFSET
//   save OFFSET BYTES PATH     after the run, write image[OFFSET, OFFSET+BYTES) to PATH
//
// vta()'s pointers (uops, inputs, weights, biases, outputs) all point at the image's first
// byte, as VTA's PYNQ runtime passes physical addresses with every base 0: an instruction's
// DRAM address, in elements of the kind it moves, is the byte offset divided by the element
// size. On success the driver prints one line to stderr:
//   oracle-driver: insns=N executed=E unread=U
// E counts the instructions vta() dispatched to its modules; U the instructions left unread in
// its queues when it returned. A failed run exits non-zero with a message (vta.cc's final
// assertion, that no dependency token is left, aborts the process).
#include "vta.h"  // VTA's: the design under test (vta.cc) and hw_spec.h

#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static_assert(sizeof(insn_T) == VTA_INS_WIDTH / 8, "ap_uint<128> must hold exactly 16 bytes");
static_assert(sizeof(uop_T) == VTA_UOP_WIDTH / 8, "ap_uint<32> must hold exactly 4 bytes");
static_assert(sizeof(bus_T) == VTA_BUS_WIDTH / 8, "bus_T must hold exactly the bus width");

namespace {

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "oracle-driver: %s\n", msg.c_str());
  std::exit(2);
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read " + path);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const char* data, std::size_t n) {
  std::ofstream out(path, std::ios::binary);
  if (!out || !out.write(data, static_cast<std::streamsize>(n))) fail("cannot write " + path);
}

// ------------------------------------------------------------------------- layout

template <typename S>
void print_field(const char* insn, const char* name, void (*set)(S&)) {
  union {
    S s;
    uint64_t w[2];
  } u;
  std::memset(&u, 0, sizeof(u));
  set(u.s);
  int first = -1, width = 0;
  for (int b = 0; b < 128; ++b) {
    if ((u.w[b / 64] >> (b % 64)) & 1) {
      if (first < 0) first = b;
      ++width;
    }
  }
  std::printf("field %s %s %d %d\n", insn, name, first, width);
}

volatile uint64_t g_ones = ~0ULL;  // volatile: no constant-overflow warnings

#define FIELD(INSN, TYPE, NAME) \
  print_field<TYPE>(INSN, #NAME, [](TYPE& s) { s.NAME = g_ones; })
#define MACRO(NAME) std::printf("macro %s %lld\n", #NAME, static_cast<long long>(NAME))

int print_layout() {
  FIELD("mem", VTAMemInsn, opcode);
  FIELD("mem", VTAMemInsn, pop_prev_dep);
  FIELD("mem", VTAMemInsn, pop_next_dep);
  FIELD("mem", VTAMemInsn, push_prev_dep);
  FIELD("mem", VTAMemInsn, push_next_dep);
  FIELD("mem", VTAMemInsn, memory_type);
  FIELD("mem", VTAMemInsn, sram_base);
  FIELD("mem", VTAMemInsn, dram_base);
  FIELD("mem", VTAMemInsn, y_size);
  FIELD("mem", VTAMemInsn, x_size);
  FIELD("mem", VTAMemInsn, x_stride);
  FIELD("mem", VTAMemInsn, y_pad_0);
  FIELD("mem", VTAMemInsn, y_pad_1);
  FIELD("mem", VTAMemInsn, x_pad_0);
  FIELD("mem", VTAMemInsn, x_pad_1);
  FIELD("gemm", VTAGemInsn, opcode);
  FIELD("gemm", VTAGemInsn, pop_prev_dep);
  FIELD("gemm", VTAGemInsn, pop_next_dep);
  FIELD("gemm", VTAGemInsn, push_prev_dep);
  FIELD("gemm", VTAGemInsn, push_next_dep);
  FIELD("gemm", VTAGemInsn, reset_reg);
  FIELD("gemm", VTAGemInsn, uop_bgn);
  FIELD("gemm", VTAGemInsn, uop_end);
  FIELD("gemm", VTAGemInsn, iter_out);
  FIELD("gemm", VTAGemInsn, iter_in);
  FIELD("gemm", VTAGemInsn, dst_factor_out);
  FIELD("gemm", VTAGemInsn, dst_factor_in);
  FIELD("gemm", VTAGemInsn, src_factor_out);
  FIELD("gemm", VTAGemInsn, src_factor_in);
  FIELD("gemm", VTAGemInsn, wgt_factor_out);
  FIELD("gemm", VTAGemInsn, wgt_factor_in);
  FIELD("alu", VTAAluInsn, opcode);
  FIELD("alu", VTAAluInsn, pop_prev_dep);
  FIELD("alu", VTAAluInsn, pop_next_dep);
  FIELD("alu", VTAAluInsn, push_prev_dep);
  FIELD("alu", VTAAluInsn, push_next_dep);
  FIELD("alu", VTAAluInsn, reset_reg);
  FIELD("alu", VTAAluInsn, uop_bgn);
  FIELD("alu", VTAAluInsn, uop_end);
  FIELD("alu", VTAAluInsn, iter_out);
  FIELD("alu", VTAAluInsn, iter_in);
  FIELD("alu", VTAAluInsn, dst_factor_out);
  FIELD("alu", VTAAluInsn, dst_factor_in);
  FIELD("alu", VTAAluInsn, src_factor_out);
  FIELD("alu", VTAAluInsn, src_factor_in);
  FIELD("alu", VTAAluInsn, alu_opcode);
  FIELD("alu", VTAAluInsn, use_imm);
  FIELD("alu", VTAAluInsn, imm);
  // micro-op fields as vta.cc decodes them (uop.range(hi, lo)), GEMM and ALU
  MACRO(VTA_UOP_GEM_0_0);
  MACRO(VTA_UOP_GEM_0_1);
  MACRO(VTA_UOP_GEM_1_0);
  MACRO(VTA_UOP_GEM_1_1);
  MACRO(VTA_UOP_GEM_2_0);
  MACRO(VTA_UOP_GEM_2_1);
  MACRO(VTA_UOP_ALU_0_0);
  MACRO(VTA_UOP_ALU_0_1);
  MACRO(VTA_UOP_ALU_1_0);
  MACRO(VTA_UOP_ALU_1_1);
  // element sizes and buffer depths
  MACRO(VTA_UOP_ELEM_BYTES);
  MACRO(VTA_INP_ELEM_BYTES);
  MACRO(VTA_WGT_ELEM_BYTES);
  MACRO(VTA_ACC_ELEM_BYTES);
  MACRO(VTA_OUT_ELEM_BYTES);
  MACRO(VTA_UOP_BUFF_DEPTH);
  MACRO(VTA_INP_BUFF_DEPTH);
  MACRO(VTA_WGT_BUFF_DEPTH);
  MACRO(VTA_ACC_BUFF_DEPTH);
  MACRO(VTA_BUS_WIDTH);
  MACRO(VTA_SHR_ARG_BIT_WIDTH);
  std::printf("sizeof insn_T %zu\nsizeof uop_T %zu\nsizeof bus_T %zu\n", sizeof(insn_T),
              sizeof(uop_T), sizeof(bus_T));
  return 0;
}

// ------------------------------------------------------------------------- run

struct Manifest {
  std::size_t image_bytes = 0;
  int fill = 0;
  std::size_t insn_count = 0;
  std::string insn_path;
  struct Load {
    std::size_t offset;
    std::string path;
  };
  struct Save {
    std::size_t offset, bytes;
    std::string path;
  };
  std::vector<Load> loads;
  std::vector<Save> saves;
};

Manifest parse_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read manifest " + path);
  Manifest m;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    std::istringstream ss(line);
    std::string what;
    if (!(ss >> what) || what[0] == '#') continue;
    bool ok = true;
    if (what == "image") {
      ok = static_cast<bool>(ss >> m.image_bytes);
    } else if (what == "fill") {
      ok = static_cast<bool>(ss >> m.fill) && m.fill >= 0 && m.fill < 256;
    } else if (what == "insns") {
      ok = static_cast<bool>(ss >> m.insn_count >> m.insn_path);
    } else if (what == "load") {
      Manifest::Load l;
      ok = static_cast<bool>(ss >> l.offset >> l.path);
      m.loads.push_back(l);
    } else if (what == "save") {
      Manifest::Save s;
      ok = static_cast<bool>(ss >> s.offset >> s.bytes >> s.path);
      m.saves.push_back(s);
    } else {
      ok = false;
    }
    if (!ok) fail(path + ":" + std::to_string(lineno) + ": cannot read '" + line + "'");
  }
  return m;
}

struct Call {
  uint32_t count;
  insn_T* insns;
  char* image;
};

void* call_vta(void* arg) {
  Call* c = static_cast<Call*>(arg);
  vta(c->count, c->insns, reinterpret_cast<uop_T*>(c->image), reinterpret_cast<bus_T*>(c->image),
      reinterpret_cast<bus_T*>(c->image), reinterpret_cast<bus_T*>(c->image),
      reinterpret_cast<bus_T*>(c->image));
  return nullptr;
}

// vta() keeps its inp, wgt and out buffers as locals on its stack (about 330 KB on pynq):
// it runs on a thread whose stack is ours, every byte set to the manifest's fill byte, so a
// read of a buffer entry nothing wrote sees that byte, the same on every run.
constexpr std::size_t kStackBytes = std::size_t(64) << 20;

int run(const std::string& manifest_path) {
  Manifest m = parse_manifest(manifest_path);
  std::vector<char> image(m.image_bytes + 64, 0);
  char* base = image.data() + (64 - reinterpret_cast<std::uintptr_t>(image.data()) % 64) % 64;
  for (const auto& l : m.loads) {
    std::vector<char> data = read_file(l.path);
    if (l.offset + data.size() > m.image_bytes) fail("region " + l.path + " ends past the image");
    std::memcpy(base + l.offset, data.data(), data.size());
  }
  std::vector<char> raw = read_file(m.insn_path);
  if (raw.size() != m.insn_count * sizeof(insn_T)) fail("instruction file has the wrong size");
  std::vector<insn_T> insns(m.insn_count);
  std::memcpy(static_cast<void*>(insns.data()), raw.data(), raw.size());

  void* stack = std::aligned_alloc(4096, kStackBytes);
  if (!stack) fail("cannot allocate the stack");
  std::memset(stack, m.fill, kStackBytes);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, stack, kStackBytes);
  Call call{static_cast<uint32_t>(m.insn_count), insns.data(), base};
  pthread_t thread;
  if (pthread_create(&thread, &attr, call_vta, &call) != 0) fail("cannot start the thread");
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  std::free(stack);
  std::fflush(stdout);

  for (const auto& s : m.saves) {
    if (s.offset + s.bytes > m.image_bytes) fail("save region ends past the image");
    write_file(s.path, base + s.offset, s.bytes);
  }
  // every instruction vta() dispatched was written twice into an instruction stream (fetch's
  // queue, then the module's); fetch wrote each once
  std::size_t writes = hls::stream<insn_T>::writes();
  std::size_t executed = writes >= m.insn_count ? writes - m.insn_count : 0;
  std::fprintf(stderr, "oracle-driver: insns=%zu executed=%zu unread=%zu\n", m.insn_count,
               executed, hls::stream<insn_T>::leftover());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "layout" && argc == 2) return print_layout();
  if (mode == "run" && argc == 3) return run(argv[2]);
  std::fprintf(stderr, "usage: %s layout | %s run MANIFEST\n", argv[0], argv[0]);
  return 2;
}
