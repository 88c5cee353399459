#pragma once
// A mask applied to a row of logits, in place, on the CPU: -inf wherever the
// token's bit is clear. The row's element type is given at run time (an
// inference server's logits are float32, float16 or bfloat16); the values
// are only ever overwritten with -inf, so no arithmetic on half floats is
// needed: each type's -inf bit pattern is stored.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace cgram {

enum class LogitsType : uint8_t { Float32, Float16, BFloat16 };
// "float32", "float16" or "bfloat16"; nothing for another name.
std::optional<LogitsType> parse_logits_type(std::string_view name);
size_t logits_type_bytes(LogitsType type);

// Sets logits[t] to -inf for every t < vocab whose bit (t % 32 of word
// t / 32) is clear in `mask`, and for every t at or past 32 × mask.size()
// (a model's padding ids). `logits` holds `vocab` elements of `type`,
// suitably aligned.
void apply_mask_to_logits(void* logits, LogitsType type, size_t vocab, std::span<const uint32_t> mask);

}  // namespace cgram
