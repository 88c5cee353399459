#include "large_stack.h"

#include <pthread.h>

namespace cgram {
namespace {
void* run_work(void* work) {
  (*static_cast<const std::function<void()>*>(work))();
  return nullptr;
}
}  // namespace

bool run_on_large_stack(const std::function<void()>& work, size_t stack_bytes) {
  pthread_attr_t attributes;
  if (pthread_attr_init(&attributes) != 0) return false;
  pthread_t thread;
  const bool started = pthread_attr_setstacksize(&attributes, stack_bytes) == 0 &&
                       pthread_create(&thread, &attributes, run_work, const_cast<std::function<void()>*>(&work)) == 0;
  pthread_attr_destroy(&attributes);
  if (started) pthread_join(thread, nullptr);
  return started;
}

}  // namespace cgram
