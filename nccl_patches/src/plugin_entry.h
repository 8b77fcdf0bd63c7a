/*
 * plugin_entry.h - the recorder's own profiler entry points (profiler_plugin.c) and the
 * tables it exports, for chain.c, which wraps them to forward every call to a second plugin.
 * Why a header: the wrappers call the recorder's functions directly (no table lookup), and the
 * constructor in chain.c puts the wrappers into the exported tables before NCCL reads them.
 */
#ifndef HF_PLUGIN_ENTRY_H
#define HF_PLUGIN_ENTRY_H

#include "nccl_profiler_abi.h"

ncclResult_t init_v2(void** context, int* mask);
ncclResult_t init_v3(void** context, int* mask);
ncclResult_t init_v4(void** context, int* mask, const char* name, uint64_t hash, int nnodes, int nranks, int rank,
                     ncclDebugLogger_t logfn);
ncclResult_t init_v5(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes, int nranks, int rank,
                     ncclDebugLogger_t logfn);
ncclResult_t init_v6(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes, int nranks, int rank,
                     ncclDebugLogger_t logfn);
ncclResult_t start_v2(void* context, void** handle, ncclProfilerEventDescr_v2_t* d);
ncclResult_t start_v3(void* context, void** handle, ncclProfilerEventDescr_v3_t* d);
ncclResult_t start_v4(void* context, void** handle, ncclProfilerEventDescr_v4_t* d);
ncclResult_t start_v5(void* context, void** handle, ncclProfilerEventDescr_v5_t* d);
ncclResult_t start_v6(void* context, void** handle, ncclProfilerEventDescr_v6_t* d);
ncclResult_t stop_event(void* handle);
ncclResult_t record_v2(void* h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v2_t* a);
ncclResult_t record_v4(void* h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v4_t* a);
ncclResult_t record_v5(void* h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v5_t* a);
ncclResult_t finalize(void* context);

extern ncclProfiler_v2_t ncclProfiler_v2;
extern ncclProfiler_v3_t ncclProfiler_v3;
extern ncclProfiler_v4_t ncclProfiler_v4;
extern ncclProfiler_v5_t ncclProfiler_v5;
extern ncclProfiler_v6_t ncclProfiler_v6;

#endif
