/*
 * The list of NVML functions gpuslice declares, written once, as
 * X(return, symbol, (parameters)); see cuda_funcs.h for why it is separate.
 */
#ifndef GPUSLICE_NVML_FUNCS_H
#define GPUSLICE_NVML_FUNCS_H

#define GS_NVML_FUNCS(X)                                                                           \
    X(nvmlReturn_t, nvmlInit, (void))                                                              \
    X(nvmlReturn_t, nvmlInit_v2, (void))                                                           \
    X(nvmlReturn_t, nvmlInitWithFlags, (unsigned int flags))                                       \
    X(nvmlReturn_t, nvmlShutdown, (void))                                                          \
    X(const char *, nvmlErrorString, (nvmlReturn_t result))                                        \
    X(nvmlReturn_t, nvmlSystemGetDriverVersion, (char *version, unsigned int length))              \
    X(nvmlReturn_t, nvmlSystemGetCudaDriverVersion, (int *cudaDriverVersion))                      \
    X(nvmlReturn_t, nvmlDeviceGetCount, (unsigned int *deviceCount))                               \
    X(nvmlReturn_t, nvmlDeviceGetCount_v2, (unsigned int *deviceCount))                            \
    X(nvmlReturn_t, nvmlDeviceGetHandleByIndex, (unsigned int index, nvmlDevice_t *device))        \
    X(nvmlReturn_t, nvmlDeviceGetHandleByIndex_v2, (unsigned int index, nvmlDevice_t *device))     \
    X(nvmlReturn_t, nvmlDeviceGetHandleByUUID, (const char *uuid, nvmlDevice_t *device))           \
    X(nvmlReturn_t, nvmlDeviceGetIndex, (nvmlDevice_t device, unsigned int *index))                \
    X(nvmlReturn_t, nvmlDeviceGetName, (nvmlDevice_t device, char *name, unsigned int length))     \
    X(nvmlReturn_t, nvmlDeviceGetUUID, (nvmlDevice_t device, char *uuid, unsigned int length))     \
    X(nvmlReturn_t, nvmlDeviceGetCudaComputeCapability,                                            \
      (nvmlDevice_t device, int *major, int *minor))                                               \
    X(nvmlReturn_t, nvmlDeviceGetNumGpuCores, (nvmlDevice_t device, unsigned int *numCores))     \
    X(nvmlReturn_t, nvmlDeviceGetAttributes_v2,                                                    \
      (nvmlDevice_t device, nvmlDeviceAttributes_t * attributes))                                  \
    X(nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t device, nvmlMemory_t * memory))         \
    X(nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t device, nvmlMemory_v2_t * memory))   \
    X(nvmlReturn_t, nvmlDeviceGetUtilizationRates,                                                 \
      (nvmlDevice_t device, nvmlUtilization_t * utilization))                                      \
    X(nvmlReturn_t, nvmlDeviceGetSamples,                                                          \
      (nvmlDevice_t device, nvmlSamplingType_t type, unsigned long long lastSeenTimeStamp,        \
       nvmlValueType_t * sampleValType, unsigned int *sampleCount, nvmlSample_t *samples))          \
    X(nvmlReturn_t, nvmlDeviceGetProcessUtilization,                                               \
      (nvmlDevice_t device, nvmlProcessUtilizationSample_t * utilization,                          \
       unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp))                   \
    X(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses,                                          \
      (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v1_t *infos))                 \
    X(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v3,                                       \
      (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))                    \
    X(nvmlReturn_t, nvmlDeviceGetPowerUsage, (nvmlDevice_t device, unsigned int *power))           \
    X(nvmlReturn_t, nvmlDeviceGetClockInfo,                                                        \
      (nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock))                            \
    X(nvmlReturn_t, nvmlDeviceGetTemperature,                                                      \
      (nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp))

#endif /* GPUSLICE_NVML_FUNCS_H */
