#include "shared_object.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "binary_io.h"
#include "file_io.h"
#include "jit_session.h"
#include "matcher_ir.h"
#include "version.h"

extern char** environ;

namespace cgram {
namespace {

constexpr char kMagic[8] = {'C', 'G', 'R', 'A', 'M', 'A', 'O', 'T'};
constexpr char kPayload[] = "cgram_payload";
constexpr char kPrefix[] = "cgram_";

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

uint64_t file_hash(std::string_view body, const SharedObjectTrailer& trailer) {
  const std::string_view fields(reinterpret_cast<const char*>(&trailer), offsetof(SharedObjectTrailer, file_hash));
  return ir::hash_bytes(fields, ir::hash_bytes(body));
}

// The object file of the kernels and the payload, for the host.
Result<std::string> emit_object(const CompiledGrammar& grammar, const std::string& payload) {
  jit::initialize_native_target();
  const std::string triple = llvm::sys::getDefaultTargetTriple();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) return Error{ErrorCode::Backend, "no LLVM target for " + triple + ": " + error};
  std::unique_ptr<llvm::TargetMachine> machine(
      target->createTargetMachine(triple, "generic", "", llvm::TargetOptions(), llvm::Reloc::PIC_));
  if (!machine) return Error{ErrorCode::Backend, "cannot create a target machine for " + triple};
  llvm::LLVMContext context;
  auto module = codegen::build_matcher_module(context, grammar.lexical(), grammar.table(),
                                              grammar.index().follower_first_bytes(),
                                              kPrefix);
  if (!module) return Error{ErrorCode::Internal, "the generated IR does not verify (a bug in cgram's code generator)"};
  module->setTargetTriple(triple);
  module->setDataLayout(machine->createDataLayout());
  codegen::optimize(*module, machine.get());
  codegen::emit_constant_data(*module, payload, kPayload);
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager passes;
  if (machine->addPassesToEmitFile(passes, stream, nullptr, llvm::CodeGenFileType::ObjectFile))
    return Error{ErrorCode::Backend, "LLVM cannot emit an object file for " + triple};
  passes.run(*module);
  return std::string(buffer.data(), buffer.size());
}

std::string find_linker() {
  for (const char* candidate : {"/usr/bin/ld.lld-19", "/usr/lib/llvm-19/bin/ld.lld", "/usr/bin/ld.lld"})
    if (access(candidate, X_OK) == 0) return candidate;
  return "";
}

// Runs argv[0] with these arguments; the error says how it failed.
std::optional<std::string> run(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  if (int e = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ); e != 0)
    return fmt::format("cannot run {}: {}", args[0], std::strerror(e));
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return fmt::format("cannot wait for {}", args[0]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return fmt::format("{} failed (status {})", args[0], status);
  return std::nullopt;
}

std::optional<std::string> link_shared(const std::string& object, const std::string& output) {
  const std::string lld = find_linker();
  if (!lld.empty()) return run({lld, "-shared", "--build-id=none", "-o", output, object});
  return run({"cc", "-shared", "-nostdlib", "-o", output, object});
}

std::string version_string(const char (&field)[16]) { return std::string(field, strnlen(field, sizeof(field))); }

}  // namespace

Result<void> save_shared_object(const CompiledGrammar& grammar, const std::string& path, SharedObjectTimings* timings) {
  using Clock = std::chrono::steady_clock;
  SharedObjectTimings local;
  SharedObjectTimings& t = timings ? *timings : local;
  auto t0 = Clock::now();
  const std::string payload = grammar.save_tables();
  auto object = emit_object(grammar, payload);
  if (auto* error = object.if_error()) return *error;
  t.codegen_ms = ms_since(t0);
  auto t1 = Clock::now();
  // Temporary names unique to this process and call: two saves to the same
  // path (two threads, two processes) must not remove each other's files;
  // the final rename makes the last one win whole.
  static std::atomic<unsigned> save_counter{0};
  const std::string unique = fmt::format("{}.{}.{}", path, ::getpid(), save_counter.fetch_add(1));
  const std::string object_path = unique + ".o.tmp", linked_path = unique + ".tmp";
  {
    std::ofstream out(object_path, std::ios::binary);
    out << *object;
    if (!out) return Error{ErrorCode::Io, fmt::format("cannot write '{}'", object_path)};
  }
  auto link_error = link_shared(object_path, linked_path);
  std::error_code ignored;  // a temporary file left behind is no reason to fail
  std::filesystem::remove(object_path, ignored);
  if (link_error) {
    std::filesystem::remove(linked_path, ignored);
    return Error{ErrorCode::Backend, "cannot link the shared object: " + *link_error};
  }
  auto linked = read_regular_file(linked_path, "shared object", SIZE_MAX);
  if (!linked) return linked.error();
  const std::string& body = *linked;
  SharedObjectTrailer trailer{};
  std::memcpy(trailer.magic, kMagic, sizeof(kMagic));
  trailer.abi_version = kAbiVersion;
  trailer.trailer_size = sizeof(SharedObjectTrailer);
  std::strncpy(trailer.cgram_version, kVersion, sizeof(trailer.cgram_version) - 1);
  trailer.vocab_fingerprint = grammar.vocabulary().fingerprint();
  trailer.grammar_hash = grammar.grammar_hash();
  trailer.payload_hash = ir::hash_bytes(payload);
  trailer.body_size = body.size();
  trailer.file_hash = file_hash(body, trailer);
  {
    std::ofstream out(linked_path, std::ios::binary | std::ios::app);
    out.write(reinterpret_cast<const char*>(&trailer), sizeof(trailer));
    if (!out) return Error{ErrorCode::Io, fmt::format("cannot write '{}'", linked_path)};
  }
  std::error_code ec;
  std::filesystem::rename(linked_path, path, ec);
  if (ec) return Error{ErrorCode::Io, fmt::format("cannot write '{}': {}", path, ec.message())};
  t.link_ms = ms_since(t1);
  t.bytes = body.size() + sizeof(trailer);
  return {};
}

CompileResult load_shared_object(const std::string& path, std::shared_ptr<const Vocabulary> vocab,
                                 const SharedObjectLimits& limits) {
  if (!vocab) return Error{ErrorCode::InvalidInput, "load: no vocabulary"};
  // The file is opened once: what is checked is what gets mapped (dlopen
  // goes through this descriptor, not the path, which could be replaced in
  // between, or found on the library search path).
  auto opened = open_regular_file(path, "shared object");
  if (!opened) return opened.error();
  auto descriptor = std::make_shared<FileDescriptor>(std::move(*opened));
  auto read = read_bounded(descriptor->get(), path, "shared object", limits.max_file_bytes);
  if (!read) return read.error();
  const std::string& file = *read;
  SharedObjectTrailer trailer{};
  const bool has_trailer = file.size() >= sizeof(trailer) &&
                           std::memcmp(file.data() + file.size() - sizeof(trailer), kMagic, sizeof(kMagic)) == 0;
  if (!has_trailer) {
    if (file.size() >= 4 && file.compare(0, 4, "\x7f" "ELF") == 0)
      return Error{ErrorCode::InvalidInput, fmt::format("'{}' is not a complete cgram object: no cgram trailer at its "
                                                        "end (truncated, or not made by cgram compile)",
                                                        path)};
    return Error{ErrorCode::InvalidInput, fmt::format("'{}' is not a cgram object (make one with cgram compile)", path)};
  }
  std::memcpy(&trailer, file.data() + file.size() - sizeof(trailer), sizeof(trailer));
  if (trailer.abi_version != kAbiVersion || trailer.trailer_size != sizeof(trailer))
    return Error{ErrorCode::Unsupported,
                 fmt::format("'{}' has cgram ABI version {}; this cgram reads version {}: recompile it", path,
                             trailer.abi_version, kAbiVersion)};
  if (version_string(trailer.cgram_version) != kVersion)
    return Error{ErrorCode::InvalidInput, fmt::format("'{}' was made by cgram {}; this is cgram {}: recompile it", path,
                                                      version_string(trailer.cgram_version), kVersion)};
  if (trailer.body_size != file.size() - sizeof(trailer))
    return Error{ErrorCode::InvalidInput,
                 fmt::format("'{}' is truncated or has bytes inserted ({} bytes before its trailer, {} expected)", path,
                             file.size() - sizeof(trailer), trailer.body_size)};
  if (trailer.vocab_fingerprint != vocab->fingerprint())
    return Error{
        ErrorCode::InvalidInput,
        fmt::format(
            "'{}' was compiled for another vocabulary (fingerprint {:016x}; '{}' has {:016x}): compile it for this one",
            path, trailer.vocab_fingerprint, vocab->name(), vocab->fingerprint())};
  if (file_hash(std::string_view(file).substr(0, trailer.body_size), trailer) != trailer.file_hash)
    return Error{ErrorCode::InvalidInput,
                 fmt::format("'{}' is corrupted: its checksum does not match (edited or damaged)", path)};

  // Verified: map it.
  // The descriptor stays open as long as the object is loaded: glibc knows
  // loaded objects by name, and a reused descriptor number would hand back
  // an older object.
  const std::string mapped = fmt::format("/proc/self/fd/{}", descriptor->get());
  void* handle = dlopen(mapped.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return Error{ErrorCode::InvalidInput, fmt::format("cannot load '{}': {}", path, dlerror())};
  std::shared_ptr<void> owner(handle, [descriptor](void* h) { dlclose(h); });
  auto symbol = [&](const std::string& name) { return dlsym(handle, name.c_str()); };
  const auto* payload = static_cast<const char*>(symbol(kPayload));
  const auto* payload_size = static_cast<const uint64_t*>(symbol(std::string(kPayload) + "_size"));
  if (!payload || !payload_size) return Error{ErrorCode::InvalidInput, fmt::format("'{}' holds no cgram tables", path)};
  const std::string_view tables(payload, *payload_size);
  if (*payload_size > file.size() || ir::hash_bytes(tables) != trailer.payload_hash)
    return Error{ErrorCode::InvalidInput, fmt::format("'{}' is corrupted: its tables do not match its checksum", path)};
  auto loaded = CompiledGrammar::load_tables(tables, std::move(vocab));
  if (auto* error = loaded.if_error())
    return Error{ErrorCode::InvalidInput, fmt::format("'{}': {}", path, error->message)};
  const auto& grammar = *loaded;
  if (grammar->grammar_hash() != trailer.grammar_hash)
    return Error{ErrorCode::InvalidInput, fmt::format("'{}' is corrupted: its tables belong to another grammar", path)};
  auto kernels = std::make_shared<Kernels>();
  kernels->tier = "aot";
  kernels->functions.bind_each([&](std::string_view kernel, auto& slot) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(symbol(codegen::kernel_symbol(kPrefix, kernel)));
  });
  if (!kernels->functions.complete())
    return Error{ErrorCode::InvalidInput, fmt::format("'{}' lacks some of its kernels", path)};
  kernels->code_bytes = trailer.body_size - *payload_size;
  kernels->owner = std::move(owner);
  grammar->bind_tables(*kernels);
  grammar->install_kernels(std::move(kernels));
  return loaded;
}

}  // namespace cgram
