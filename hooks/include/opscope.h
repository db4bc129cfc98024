/* opscope.h — the optional C API a program may call to help opscope's tools. Every function works whether
 * or not the program runs under libopscope.so: the hook's entry points are declared weak, so without the
 * hook they are NULL and these inline functions do nothing. No library to link.
 *
 *   opscope_step()   marks the end of a training step: OP_TIME_MEASURE_SCHEDULE counts these steps.
 */
#ifndef OPSCOPE_H_
#define OPSCOPE_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Defined by libopscope.so (exported, default visibility); NULL when the hook is not loaded. */
__attribute__((weak)) void opscope_hook_step(void);

static inline void opscope_step(void) {
  if (opscope_hook_step) opscope_hook_step();
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPSCOPE_H_ */
