/*
 * mlurt.h — the simulated MLU runtime (libmlurt.so), a CNRT-shaped C API.
 *
 * Devices are simulated on the host CPU. Device memory lives in an address range of each device's own
 * (reserved with mmap, never overlapping the host heap), so host code can dereference device pointers the
 * way the simulated kernels do. Each queue is executed in order by a worker thread of its own, so device
 * work is truly asynchronous to the caller.
 *
 * Conventions:
 *  - Every function returns an mlurtStatus_t (a few return a value and say so). A failing call records
 *    its status and a message for the calling thread: see mlurtGetLastError and mlurtGetLastErrorMessage.
 *  - A NULL mlurtQueue_t means the default queue of the calling thread's current device.
 *  - Queue and notifier handles are never reused: a destroyed handle is reported as
 *    MLURT_ERROR_INVALID_HANDLE.
 *  - An error inside asynchronous work is sticky on its queue: the next mlurtQueueSync, mlurtQueueQuery or
 *    mlurtDeviceSynchronize returns it (once), with a message naming the task.
 *
 * Environment (read once, when the library is loaded; a malformed value stops the program, exit 2):
 *  MLU_SIM_DEVICE_COUNT  number of simulated devices, 1..64 (default 2)
 *  MLU_SIM_MEMORY_MB     memory per device in MiB, 1..1048576 (default 8192)
 *  MLU_SIM_CORES         simulated cores per device, 1..1024 (default: the host's hardware threads)
 */
#ifndef MLU_MLURT_H_
#define MLU_MLURT_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define MLURT_API __attribute__((visibility("default")))
#else
#define MLURT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Result of every runtime call. */
typedef enum mlurtStatus_t {
  MLURT_SUCCESS = 0,                        /* the call succeeded */
  MLURT_ERROR_INVALID_VALUE = 1,            /* an argument is out of range or NULL */
  MLURT_ERROR_INVALID_DEVICE = 2,           /* no such device */
  MLURT_ERROR_OUT_OF_MEMORY = 3,            /* the device (or host) has no room for the allocation */
  MLURT_ERROR_INVALID_POINTER = 4,          /* not a live allocation of the kind expected (double free...) */
  MLURT_ERROR_INVALID_MEMCPY_DIRECTION = 5, /* pointers do not match the copy direction */
  MLURT_ERROR_INVALID_HANDLE = 6,           /* unknown or destroyed queue or notifier */
  MLURT_ERROR_NOT_READY = 7,                /* queued work or the notifier has not completed yet */
  MLURT_ERROR_LAUNCH_FAILED = 8,            /* an asynchronous task failed (sticky error of a queue) */
  MLURT_ERROR_NOTIFIER_TIMING_DISABLED = 9, /* elapsed time asked of a notifier created without timing */
  MLURT_ERROR_NOTIFIER_NOT_PLACED = 10,     /* elapsed time asked of a notifier never placed on a queue */
  MLURT_ERROR_NOT_PERMITTED = 11, /* the call would deadlock (e.g. syncing a queue from its worker) */
  MLURT_ERROR_SHUTDOWN = 12,      /* the runtime has shut down (the process is exiting) */
  MLURT_ERROR_INTERNAL = 13       /* a bug in the runtime, or a task threw an exception */
} mlurtStatus_t;

/* Kind of memory a pointer refers to (mlurtPointerGetAttributes). */
typedef enum mlurtMemoryType_t {
  MLURT_MEMORY_UNKNOWN = 0, /* NULL, or inside a device's range but not in a live allocation */
  MLURT_MEMORY_HOST = 1,    /* ordinary (pageable) host memory: anything else */
  MLURT_MEMORY_PINNED = 2,  /* pinned host memory from mlurtHostMalloc */
  MLURT_MEMORY_DEVICE = 3   /* device memory from mlurtMalloc */
} mlurtMemoryType_t;

/* Direction of a copy; checked against the pointers' attributes. */
typedef enum mlurtMemcpyKind_t {
  MLURT_MEMCPY_HOST_TO_DEVICE = 0,
  MLURT_MEMCPY_DEVICE_TO_HOST = 1,
  MLURT_MEMCPY_DEVICE_TO_DEVICE = 2, /* also between two devices */
  MLURT_MEMCPY_HOST_TO_HOST = 3
} mlurtMemcpyKind_t;

/* Notifier creation flags. */
enum {
  MLURT_NOTIFIER_DEFAULT = 0,
  MLURT_NOTIFIER_DISABLE_TIMING = 1 /* no timestamps: cheaper, mlurtNotifierElapsedTime refuses it */
};

/* Static properties of a device. */
typedef struct mlurtDeviceProp_t {
  char name[64];          /* e.g. "MLU-SIM 370 #0" */
  int device;             /* device id */
  int coreCount;          /* simulated compute cores (MLU_SIM_CORES) */
  size_t totalMem;        /* bytes of device memory (MLU_SIM_MEMORY_MB) */
  size_t memAlignment;    /* alignment of every device allocation, 256 */
  uintptr_t addressBase;  /* first address of the device's memory range */
  uintptr_t addressLimit; /* one past the last address of the range */
} mlurtDeviceProp_t;

/* Attributes of a pointer (mlurtPointerGetAttributes). */
typedef struct mlurtPointerAttributes_t {
  mlurtMemoryType_t type; /* host, pinned, device or unknown */
  int device;             /* owning device for device memory, else -1 */
  void* base;             /* base of the allocation containing the pointer, or NULL */
  size_t size;            /* size in bytes of that allocation, or 0 */
} mlurtPointerAttributes_t;

/* Running counters of a device. */
typedef struct mlurtDeviceCounters_t {
  size_t bytesInUse;         /* device bytes currently allocated (after 256-byte rounding) */
  size_t peakBytesInUse;     /* the most bytesInUse has been since start */
  uint64_t liveAllocations;  /* allocations not yet freed */
  uint64_t totalAllocations; /* allocations made since start */
  uint64_t tasksRun;         /* tasks finished by the device's queues (kernels, copies, host functions...) */
} mlurtDeviceCounters_t;

/* Opaque handles. Values are identifiers, never dereferenced by the caller. */
typedef struct mlurtQueue_st* mlurtQueue_t;
typedef struct mlurtNotifier_st* mlurtNotifier_t;

/* A host function run by a queue's worker (mlurtLaunchHostFunc). */
typedef void (*mlurtHostFn_t)(void* userData);
/* The body of a kernel, run by a queue's worker; returns MLURT_SUCCESS or an error status. */
typedef mlurtStatus_t (*mlurtKernelFn_t)(void* args);
/* Releases a kernel's args after it ran or was dropped (may be NULL). */
typedef void (*mlurtKernelArgsDeleter_t)(void* args);

/* What a queue's worker did, reported to the activity callback after every task. */
typedef enum mlurtActivityKind_t {
  MLURT_ACTIVITY_KERNEL = 0,
  MLURT_ACTIVITY_MEMCPY = 1,
  MLURT_ACTIVITY_MEMSET = 2,
  MLURT_ACTIVITY_HOST_FUNC = 3,
  MLURT_ACTIVITY_NOTIFIER = 4,
  MLURT_ACTIVITY_QUEUE_WAIT = 5
} mlurtActivityKind_t;

/* One finished task, with the device timestamps the worker took around it. */
typedef struct mlurtActivityRecord_t {
  mlurtActivityKind_t kind;
  const char* name; /* kernel name, "memcpy H2D", "memset", "host_func", ... (valid during the call) */
  int device;       /* device of the queue */
  uint64_t queueId; /* mlurtQueueGetId of the queue */
  uint64_t taskId;  /* process-wide sequence number of the task, as returned at launch */
  uint64_t startNs; /* device timestamp (mlurtGetTimestampNs clock) when the task started */
  uint64_t endNs;   /* device timestamp when it ended */
  size_t bytes;     /* bytes copied or set; 0 for other tasks */
  mlurtStatus_t status;
  uint64_t correlationId; /* the enqueueing thread's mlurtSetCorrelationId value when it enqueued the task */
} mlurtActivityRecord_t;

/* Called on a worker thread after each task; must be quick and must not sync queues. */
typedef void (*mlurtActivityCallback_t)(const mlurtActivityRecord_t* record, void* userData);

/* ---- errors ---- */

/* Name and meaning of a status, e.g. "MLURT_ERROR_OUT_OF_MEMORY: out of device memory". */
MLURT_API const char* mlurtGetErrorString(mlurtStatus_t status);
/* Returns the calling thread's last error and resets it to MLURT_SUCCESS. */
MLURT_API mlurtStatus_t mlurtGetLastError(void);
/* Returns the calling thread's last error without resetting it. */
MLURT_API mlurtStatus_t mlurtPeekAtLastError(void);
/* Detailed message of the calling thread's last error ("" if none); valid until the thread's next call. */
MLURT_API const char* mlurtGetLastErrorMessage(void);

/* ---- devices ---- */

/* Number of simulated devices (MLU_SIM_DEVICE_COUNT). */
MLURT_API mlurtStatus_t mlurtGetDeviceCount(int* count);
/* Makes device the calling thread's current device. */
MLURT_API mlurtStatus_t mlurtSetDevice(int device);
/* The calling thread's current device (0 until set). */
MLURT_API mlurtStatus_t mlurtGetDevice(int* device);
/* Static properties of a device. */
MLURT_API mlurtStatus_t mlurtGetDeviceProperties(mlurtDeviceProp_t* prop, int device);
/* Waits for every queue of the current device; returns the first sticky queue error found. */
MLURT_API mlurtStatus_t mlurtDeviceSynchronize(void);
/* Free and total bytes of the current device's memory. */
MLURT_API mlurtStatus_t mlurtMemGetInfo(size_t* freeBytes, size_t* totalBytes);
/* Running counters (memory in use, peak, tasks run) of a device. */
MLURT_API mlurtStatus_t mlurtDeviceGetCounters(int device, mlurtDeviceCounters_t* counters);

/* ---- memory ---- */

/* Allocates size bytes (256-byte aligned) on the current device; size 0 gives *ptr = NULL. */
MLURT_API mlurtStatus_t mlurtMalloc(void** ptr, size_t size);
/* Frees device memory from mlurtMalloc (NULL is a no-op); first waits for the work already queued on its
 * device, which may still use it (not when called from a host function or kernel on a queue). */
MLURT_API mlurtStatus_t mlurtFree(void* ptr);
/* Allocates size bytes of pinned host memory (page aligned); size 0 gives *ptr = NULL. */
MLURT_API mlurtStatus_t mlurtHostMalloc(void** ptr, size_t size);
/* Frees pinned host memory from mlurtHostMalloc (NULL is a no-op), after the work queued on every device. */
MLURT_API mlurtStatus_t mlurtHostFree(void* ptr);
/* Kind, device, base and size of the allocation containing ptr (interior pointers too). */
MLURT_API mlurtStatus_t mlurtPointerGetAttributes(mlurtPointerAttributes_t* attributes, const void* ptr);

/* Copies size bytes and returns when done; ordered after work already on the device's default queue. */
MLURT_API mlurtStatus_t mlurtMemcpy(void* dst, const void* src, size_t size, mlurtMemcpyKind_t kind);
/* Enqueues a copy on queue; host buffers must stay valid until it has run. */
MLURT_API mlurtStatus_t mlurtMemcpyAsync(void* dst, const void* src, size_t size, mlurtQueue_t queue,
                                         mlurtMemcpyKind_t kind);
/* Sets size bytes of device memory to the byte value and returns when done (default-queue order). */
MLURT_API mlurtStatus_t mlurtMemset(void* ptr, int value, size_t size);
/* Enqueues a memset of device memory on queue. */
MLURT_API mlurtStatus_t mlurtMemsetAsync(void* ptr, int value, size_t size, mlurtQueue_t queue);

/* ---- queues ---- */

/* Creates a queue on the current device, run in order by a worker thread of its own. */
MLURT_API mlurtStatus_t mlurtQueueCreate(mlurtQueue_t* queue);
/* Waits for the queue's work, stops its worker and invalidates the handle (not for the default queue). */
MLURT_API mlurtStatus_t mlurtQueueDestroy(mlurtQueue_t queue);
/* Waits until all work enqueued before the call has run; returns the queue's sticky error, if any. */
MLURT_API mlurtStatus_t mlurtQueueSync(mlurtQueue_t queue);
/* MLURT_SUCCESS if the queue is idle, MLURT_ERROR_NOT_READY if not, or its sticky error. */
MLURT_API mlurtStatus_t mlurtQueueQuery(mlurtQueue_t queue);
/* The default queue of a device (the one a NULL queue means when the device is current). */
MLURT_API mlurtStatus_t mlurtQueueGetDefault(int device, mlurtQueue_t* queue);
/* Device a queue belongs to. */
MLURT_API mlurtStatus_t mlurtQueueGetDevice(mlurtQueue_t queue, int* device);
/* Process-wide numeric id of a queue (stable, never reused; as in activity records). */
MLURT_API mlurtStatus_t mlurtQueueGetId(mlurtQueue_t queue, uint64_t* id);
/* Enqueues fn(userData) to run on the queue's worker in order with the queue's other work. */
MLURT_API mlurtStatus_t mlurtLaunchHostFunc(mlurtQueue_t queue, mlurtHostFn_t fn, void* userData);
/* Enqueues a named kernel; its device start/end are timestamped. The runtime owns args from the call on:
 * deleter(args) runs once after the kernel, or at once if the launch fails. *taskId (may be NULL) receives
 * the task's id as in activity records. */
MLURT_API mlurtStatus_t mlurtLaunchKernel(mlurtQueue_t queue, const char* name, mlurtKernelFn_t fn,
                                          void* args, mlurtKernelArgsDeleter_t deleter, uint64_t* taskId);
/* Inside a running kernel: attaches a message to the error the kernel is about to return. */
MLURT_API void mlurtKernelSetErrorMessage(const char* message);

/* ---- notifiers ---- */

/* Creates a notifier; flags is MLURT_NOTIFIER_DEFAULT or MLURT_NOTIFIER_DISABLE_TIMING. */
MLURT_API mlurtStatus_t mlurtNotifierCreate(mlurtNotifier_t* notifier, unsigned int flags);
/* Destroys a notifier; work already waiting on it is unaffected. */
MLURT_API mlurtStatus_t mlurtNotifierDestroy(mlurtNotifier_t notifier);
/* Places the notifier on queue: it completes (and takes its timestamp) when the worker reaches it. */
MLURT_API mlurtStatus_t mlurtPlaceNotifier(mlurtNotifier_t notifier, mlurtQueue_t queue);
/* MLURT_SUCCESS if the notifier's last placement has completed (or it was never placed), else NOT_READY. */
MLURT_API mlurtStatus_t mlurtNotifierQuery(mlurtNotifier_t notifier);
/* Waits until the notifier's last placement has completed. */
MLURT_API mlurtStatus_t mlurtNotifierSync(mlurtNotifier_t notifier);
/* Makes queue wait, without blocking the caller, until the notifier's current placement has completed. */
MLURT_API mlurtStatus_t mlurtQueueWaitNotifier(mlurtQueue_t queue, mlurtNotifier_t notifier);
/* Milliseconds between two completed notifiers, from the timestamps their workers took. */
MLURT_API mlurtStatus_t mlurtNotifierElapsedTime(float* ms, mlurtNotifier_t start, mlurtNotifier_t end);

/* ---- timing and activity ---- */

/* The device clock (CLOCK_MONOTONIC) in nanoseconds, as used in activity records. */
MLURT_API uint64_t mlurtGetTimestampNs(void);
/* Tags the work the calling thread enqueues from now on (kernels, copies, memsets, host functions, notifier
 * placements) with id, reported as the correlationId of its activity records (0: untagged, the default);
 * returns the thread's previous id. A profiler sets it around a call to join the call to its device work. */
MLURT_API uint64_t mlurtSetCorrelationId(uint64_t id);
/* How many tasks the calling thread has enqueued since it started (kernels, copies, memsets, host functions,
 * notifier placements and waits): read before and after a call, it tells whether the call enqueued work. */
MLURT_API uint64_t mlurtGetEnqueuedCount(void);
/* Installs (or, with NULL, removes) the callback told about every finished task. */
MLURT_API mlurtStatus_t mlurtSetActivityCallback(mlurtActivityCallback_t callback, void* userData);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLU_MLURT_H_ */
