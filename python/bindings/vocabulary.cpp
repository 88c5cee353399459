// cgram.Vocabulary: every loader, token bytes, and the tokenizer's encoder.
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <optional>

#include "bindings.h"

namespace cgram::python {
namespace {

using VocabularyPtr = std::shared_ptr<PyVocabulary>;

VocabularyOptions with_eos(const std::optional<std::vector<uint32_t>>& eos_ids) {
  VocabularyOptions options;
  options.eos_ids = eos_ids;
  return options;
}

VocabularyPtr take(VocabularyResult result) {
  if (auto* error = result.if_error()) raise(exceptions().vocabulary_error, error->message);
  auto wrapper = std::make_shared<PyVocabulary>();
  wrapper->vocab = std::move(*result);
  return wrapper;
}

uint32_t checked_id(const Vocabulary& vocab, uint32_t id) {
  if (id >= vocab.size()) throw py::index_error(fmt::format("token id {} is outside the vocabulary ({} ids)", id, vocab.size()));
  return id;
}

const char* kind_key(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::ByteLevelBpe: return "byte-level-bpe";
    case TokenizerKind::SentencePiece: return "sentencepiece";
    case TokenizerKind::Tiktoken: return "tiktoken";
    case TokenizerKind::List: return "list";
  }
  return "?";
}

std::vector<uint32_t> encode(PyVocabulary& self, std::string_view text, bool continuation) {
  const Encoder& encoder = self.get_encoder();
  EncodeResult result = continuation ? encoder.try_encode_continuation(text) : encoder.try_encode(text);
  if (auto* error = result.if_error()) raise(exceptions().vocabulary_error, error->message);
  return std::move(*result);
}

py::bytes decode(const PyVocabulary& self, const std::vector<uint32_t>& ids, bool skip_special) {
  std::string out;
  for (uint32_t id : ids) {
    checked_id(*self.vocab, id);
    if (skip_special && self.vocab->is_special(id)) continue;
    out += self.vocab->bytes(id);
  }
  return py::bytes(out);
}

}  // namespace

const Encoder& PyVocabulary::get_encoder() {
  if (!encoder) {
    auto made = Encoder::create(vocab);
    if (auto* error = made.if_error()) raise(exceptions().vocabulary_error, error->message);
    encoder = std::move(*made);
  }
  return *encoder;
}

void bind_vocabulary(py::module_& m) {
  py::class_<PyVocabulary, VocabularyPtr> cls(m, "Vocabulary", R"doc(
A tokenizer vocabulary: the exact bytes of every token id, the special ids
and the end-of-sequence ids. Immutable; share one between grammars.

Make one with Vocabulary.load(path) (Hugging Face tokenizer.json, tiktoken,
GGUF or a JSON token list, told apart by their content), from_memory,
from_tokens or bundled() (Phi-3, 32,064 ids, built into cgram).
Bad input raises VocabularyError with a precise message.)doc");

  cls.def_static(
         "load",
         [](const std::string& path, std::optional<std::vector<uint32_t>> eos_ids) {
           std::optional<VocabularyResult> result;
           {
             py::gil_scoped_release released;
             result = Vocabulary::load(path, with_eos(eos_ids));
           }
           return take(std::move(*result));
         },
         py::arg("path"), py::arg("eos_ids") = py::none(),
         "Loads a tokenizer.json (with the tokenizer_config.json beside it, for the end-of-sequence "
         "token), a tiktoken file, a GGUF file or a JSON list of tokens. `eos_ids` overrides the "
         "end-of-sequence ids the file gives.")
      .def_static(
          "from_memory",
          [](py::bytes content, const std::string& name, std::optional<std::string> config_json,
             std::optional<std::vector<uint32_t>> eos_ids) {
            return take(Vocabulary::from_memory(std::string_view(content), name, with_eos(eos_ids), config_json));
          },
          py::arg("content"), py::arg("name") = "<memory>", py::arg("config_json") = py::none(),
          py::arg("eos_ids") = py::none(),
          "The same formats as load(), from bytes. `config_json` is a tokenizer_config.json's text.")
      .def_static(
          "from_tokens",
          [](std::vector<std::string> tokens, std::vector<uint32_t> eos_ids, std::vector<uint32_t> special) {
            return take(Vocabulary::from_tokens(std::move(tokens), std::move(eos_ids), std::move(special)));
          },
          py::arg("tokens"), py::arg("eos_ids") = std::vector<uint32_t>{},
          py::arg("special") = std::vector<uint32_t>{},
          "A plain list: token i spells tokens[i] (bytes, or str as UTF-8). Ids in `special` (and the "
          "end-of-sequence ids) are never text.")
      .def_static(
          "bundled", [](std::optional<std::vector<uint32_t>> eos_ids) { return take(Vocabulary::bundled(with_eos(eos_ids))); },
          py::arg("eos_ids") = py::none(), "The vocabulary built into cgram (Phi-3, 32,064 ids).");

  cls.def("__len__", [](const PyVocabulary& self) { return self.vocab->size(); })
      .def_property_readonly("size", [](const PyVocabulary& self) { return self.vocab->size(); },
                             "The number of token ids.")
      .def_property_readonly("name", [](const PyVocabulary& self) { return self.vocab->name(); })
      .def_property_readonly("kind", [](const PyVocabulary& self) { return kind_key(self.vocab->kind()); },
                             "'byte-level-bpe', 'sentencepiece', 'tiktoken' or 'list'.")
      .def_property_readonly("eos_ids", [](const PyVocabulary& self) { return self.vocab->eos_ids(); },
                             "The end-of-sequence ids, ascending: each one ends the text.")
      .def(
          "with_eos_ids",
          [](const PyVocabulary& self, const std::vector<uint32_t>& ids) { return take(self.vocab->with_eos_ids(ids)); },
          py::arg("ids"),
          "A copy with `ids` added to the end-of-sequence ids (a model that stops on several tokens, such as "
          "Llama 3.1 Instruct's <|eot_id|>, <|eom_id|> and <|end_of_text|>). load() already adds those a "
          "generation_config.json beside tokenizer.json names.")
      .def_property_readonly("warnings", [](const PyVocabulary& self) { return self.vocab->warnings(); },
                             "What loaded but deserves a word (no end-of-sequence token, say).")
      .def_property_readonly("fingerprint", [](const PyVocabulary& self) { return self.vocab->fingerprint(); },
                             "A hash of the tokens and the special and end-of-sequence ids.")
      .def(
          "token_bytes",
          [](const PyVocabulary& self, uint32_t id) { return py::bytes(std::string(self.vocab->bytes(checked_id(*self.vocab, id)))); },
          py::arg("id"), "The exact bytes of a token.")
      .def(
          "is_special", [](const PyVocabulary& self, uint32_t id) { return self.vocab->is_special(checked_id(*self.vocab, id)); },
          py::arg("id"), "Whether the token is never text (end of sequence, control, no bytes).")
      .def(
          "is_eos", [](const PyVocabulary& self, uint32_t id) { return self.vocab->is_eos(checked_id(*self.vocab, id)); },
          py::arg("id"))
      .def(
          "find", [](const PyVocabulary& self, py::bytes bytes) { return self.vocab->find(std::string_view(bytes)); },
          py::arg("bytes"), "The id of the token that spells `bytes` exactly, or None.")
      .def(
          "display", [](const PyVocabulary& self, uint32_t id) { return self.vocab->display(id); }, py::arg("id"),
          "A readable rendering of a token (escapes for control bytes and invalid UTF-8).")
      .def("encode", &encode, py::arg("text"), py::arg("continuation") = false,
           "The tokenizer's own encoding of `text` (str, or bytes). With continuation=True no "
           "SentencePiece dummy-prefix space is added (text that follows a prompt). Raises "
           "VocabularyError where the vocabulary cannot spell the text, or has no encoder (a plain list).")
      .def("decode", &decode, py::arg("ids"), py::arg("skip_special") = true,
           "The bytes the tokens spell (special tokens left out unless skip_special=False).")
      .def("__repr__", [](const PyVocabulary& self) {
        return fmt::format("<cgram.Vocabulary '{}': {} ids, {}>", self.vocab->name(), self.vocab->size(),
                           tokenizer_kind_name(self.vocab->kind()));
      });
}

}  // namespace cgram::python
