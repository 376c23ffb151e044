// NCCL, loaded when a run of several GPUs starts (dlopen), never linked: the CPU-only build needs
// no NCCL, and a machine may carry NCCL elsewhere than the CUDA toolkit (PyTorch's wheels bring
// their own libnccl.so.2). Where it is looked for, in order:
//
//   $CREMA_NCCL_LIBRARY       a path to libnccl.so.2 (or any NCCL 2.x library)
//   libnccl.so.2, libnccl.so  the dynamic linker's search: LD_LIBRARY_PATH, the ld.so cache
//
// The table holds the few functions crema calls, declared here with NCCL's C signatures (so no
// NCCL header is needed to build): ncclComm_t and cudaStream_t are pointers, ncclResult_t,
// ncclDataType_t and ncclRedOp_t are C enums (int), ncclUniqueId is 128 bytes passed by value.
#pragma once

#include <cstddef>
#include <string>

namespace crema::distributed {

constexpr size_t kNcclUniqueIdBytes = 128;
struct NcclUniqueId {
  char bytes[kNcclUniqueIdBytes];
};
using NcclComm = struct ncclComm*;
using NcclStream = struct CUstream_st*;
enum NcclResult : int { kNcclSuccess = 0, kNcclInProgress = 7 };
enum NcclDataType : int { kNcclFloat32 = 7, kNcclFloat64 = 8, kNcclBfloat16 = 9 };
enum NcclOp : int { kNcclSum = 0, kNcclAvg = 4 };

struct NcclLibrary {
  std::string path;  // what was loaded
  int version = 0;   // ncclGetVersion: e.g. 22703 for 2.27.3
  int (*get_version)(int*);
  int (*get_unique_id)(NcclUniqueId*);
  int (*comm_init_rank)(NcclComm*, int nranks, NcclUniqueId id, int rank);
  int (*all_reduce)(const void* send, void* recv, size_t count, int dtype, int op, NcclComm,
                    NcclStream);
  int (*broadcast)(const void* send, void* recv, size_t count, int dtype, int root, NcclComm,
                   NcclStream);
  int (*comm_abort)(NcclComm);
  int (*comm_destroy)(NcclComm);
  int (*comm_get_async_error)(NcclComm, int*);
  const char* (*get_error_string)(int);

  // Throws crema::Error naming the call and NCCL's reason when `result` is not success.
  void check(int result, const char* call) const;
};

// Loads NCCL once per process (later calls return the same table). Throws crema::Error, one
// line, naming every file tried and why each failed.
const NcclLibrary& nccl_library();

}  // namespace crema::distributed
