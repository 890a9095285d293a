// An emulated GPU: its streams and engines, its memory as the caching allocator sees it,
// its PCIe host link and the host memory it copies from.
//
// One header per concept (this one includes them all):
//   gpemu/device/host_memory.h
//   gpemu/device/pcie.h
//   gpemu/device/caching_allocator.h
//   gpemu/device/device.h
//   gpemu/device/shared_gpu.h
#pragma once

#include "gpemu/device/caching_allocator.h"
#include "gpemu/device/device.h"
#include "gpemu/device/host_memory.h"
#include "gpemu/device/pcie.h"
#include "gpemu/device/shared_gpu.h"
