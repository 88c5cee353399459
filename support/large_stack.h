#pragma once
// Reading a grammar recurses once per level of nesting the user wrote (the
// parser, the walks of its tree, regexes, schemas). Each has a ceiling, and
// the ceiling is only safe if the stack under it is known: the caller's
// thread may be a server's worker with a small stack, and a sanitizer's
// frames are several times larger. So that work runs here, on a thread of
// its own with a stack of kLargeStackBytes, while the caller waits.
#include <cstddef>
#include <functional>

namespace cgram {

inline constexpr size_t kLargeStackBytes = size_t{64} << 20;   // reserved, not committed: pages are used as touched

// Runs `work` on a thread with a stack of `stack_bytes` and waits for it:
// true. False, with nothing run, when no such thread can be made (the
// process is at its limit of threads or of memory). `work` must not throw.
bool run_on_large_stack(const std::function<void()>& work, size_t stack_bytes = kLargeStackBytes);

}  // namespace cgram
