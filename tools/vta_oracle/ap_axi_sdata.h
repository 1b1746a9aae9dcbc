// ap_axi_sdata.h: the vta project's empty stand-in for Vivado HLS's AXI-stream side-channel
// header. VTA's vta.h includes it but vta.cc uses none of its types; Xilinx's open-source
// arbitrary-precision repository (HLS_arbitrary_Precision_Types) does not ship it.
#ifndef VTA_ORACLE_AP_AXI_SDATA_H_
#define VTA_ORACLE_AP_AXI_SDATA_H_
#endif  // VTA_ORACLE_AP_AXI_SDATA_H_
