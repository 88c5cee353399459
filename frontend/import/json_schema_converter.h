#pragma once
// The JSON Schema → .cgram converter behind json_schema.h, shared by its
// translation units (json_schema*.cpp) and by nothing else.
//
// The Converter is a facade over one class per job, each defined in the
// file its section names:
//   - the parts every family uses: SchemaDiagnostics (where a pointer is,
//     errors and warnings said once), RuleSet (the rules written),
//     JsonLayout (whitespace), MergeWork (the merges' work limits),
//     TextAutomata (regexes and patterns as automata), SchemaChecks (a
//     value or a name against a schema's keywords), SchemaDocument (the
//     root: $ref, $anchor, the draft);
//   - what is proved or rewritten before anything is written: OverlapProof
//     (oneOf's alternatives disjoint), SchemaMerger (allOf into one schema),
//     SchemaComplement (¬s, if/then/else, dependencies);
//   - the writers of each keyword family: KeywordCheck (what is refused or
//     ignored), AnyValueWriter (the schema `true`), ScalarWriter,
//     ArrayWriter, OtherMembersWriter and ObjectWriter, CombinatorWriter
//     (allOf, anyOf, oneOf), ValueListWriter (enum, const) and
//     ReferenceWriter ($ref).
// A writer that meets a subschema hands it back to Converter::value, which
// dispatches it to its family, and a schema it makes by merging (allOf of
// the items and `contains`, of a name's patterns, beside a $ref) to
// CombinatorWriter::value_of_merged: the recursion goes through those two.
// A member function is defined in the file its class's section names, but
// where a line says otherwise (SchemaChecks::value_fails and
// SchemaDocument::followed in json_schema_disjoint.cpp, Converter::by_type
// in json_schema_scalars.cpp).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "char_dfa.h"
#include "json_schema.h"
#include "json_text.h"

namespace cgram::json_schema_detail {

using Json = nlohmann::ordered_json;
// A grammar expression (.cgram text); nullopt when no value matches.
using Expr = std::optional<std::string>;

// --- Facts about schemas, keywords and values --------------------------------
// (json_schema.cpp unless a file is named)

// A key as a JSON pointer token (RFC 6901: ~ and / escaped).
std::string pointer_token(const std::string& key);

// JSON pointer → byte offset of the value, for diagnostics.
class JsonLocator;

// NotAKeyword: no draft's keyword; ignored like an annotation, as the
// specification says of unknown keywords.
enum class KeywordUse { Annotation, Supported, IgnoredWarning, Refused, NotAKeyword };

KeywordUse keyword_use(const std::string& key);
// The patterns an allOf merge adds beside a different `pattern` (an array of
// them; a string must match every one). Internal: no draft has this key.
inline constexpr const char* kMorePatterns = "$cgram-patterns";
// Numbers that are no integer (`true`): the complement of the integers
// among numbers, written in fixed point with a fraction digit other than 0
// (1.5, not 15e-1: numbers are written one way, as integers are). Internal.
inline constexpr const char* kFraction = "$cgram-fraction";
// `contains` as a complement writes it (¬items: some item fails), read
// whatever the schema's draft (draft 04 has no contains). Internal.
inline constexpr const char* kContains = "$cgram-contains";
// The if/then/else of the other parts an allOf merged (an array of
// {if, then, else}): each holds on its own. Internal.
inline constexpr const char* kConditionals = "$cgram-conditionals";
// A schema's patterns: `pattern` and those a merge added.
std::vector<std::string> patterns_of(const Json& s);
// The keyword `key` is a near miss of, if any (a typo, for a note).
std::optional<std::string> keyword_like(const std::string& key);
// Keywords that constrain a value whatever its type (enum and const aside).
bool constrains(const std::string& key);
// Whether a schema object says anything about the value (beyond annotations).
bool has_constraints(const Json& s);
// Whether `uri` is one of the drafts' own meta-schemas.
bool known_meta_schema(const Json& uri);
// The names an object schema lists (in properties and required).
size_t listed_names(const Json& s);
// Whether the types a schema declares are strings at most.
bool only_strings(const Json& s);
// A translation longer than this is named by a rule where it is met again.
inline constexpr size_t kInlineBytes = 200;

// (json_schema_scalars.cpp) The types a schema declares (every type where it
// declares none).
std::set<std::string> declared_types(const Json& s);
// multipleOf as 10^e, which numbers' spelling says exactly; as m·10^-e,
// which a remainder automaton of kMaxMultipleStates at most says.
std::optional<int> power_of_ten_step(const Json& s);
inline constexpr uint64_t kMaxMultipleStates = 4000;
std::optional<std::pair<uint64_t, uint32_t>> decimal_step(const Json& s);
// A format some draft defines (others are annotations).
bool specified_format(const std::string& name);
// A `not` the strings say, as the regex of the strings it excludes (empty:
// none); of `inner` where it says nothing but strings (of a schema of `types`).
std::optional<std::string> excluded_strings(const Json& s);
std::optional<std::string> strings_excluded_by(const Json& inner, const std::set<std::string>& types);

// (json_schema_combinators.cpp) Whether values of a declared type set may
// have type `t` ("number" takes "integer"); a value's JSON type ("integer"
// for a whole number); JSON Schema equality (1 equals 1.0, objects
// unordered); whether number x > number y; the alternation of grammar
// expressions (nullopt for none).
bool type_allows(const std::set<std::string>& types, const std::string& t);
std::string json_type_of(const Json& v);
bool json_equal(const Json& a, const Json& b);
bool greater(const Json& x, const Json& y);
Expr alternation(const std::vector<std::string>& alternatives);
// Both schemas as one (allOf of the two, or the one where the other is
// true or equal); an array schema's item i; the items of two merged.
Json both(const Json& x, const Json& y);
Json item_schema(const Json& s, size_t i);
void merge_items(const Json& a, const Json& b, Json& out);

// (json_schema_arrays.cpp) `contains` said by the array's grammar: one
// item matches it, with no other bound on the items (no maxItems,
// maxContains, prefixItems).
bool simple_contains(const Json& s);
// uniqueItems where the items are a few values (an enum or const of at most
// kMaxUniqueValues, or booleans) and nothing else bounds them but minItems
// and maxItems: the distinct values (each with the spellings the schema
// lists for it, as an object in two member orders), else nullopt (the
// keyword is ignored with a warning).
std::optional<std::vector<std::vector<Json>>> unique_item_values(const Json& s);
inline constexpr size_t kMaxUniqueValues = 8;

// (json_schema_negation.cpp) The values outside an enum's, as a schema.
std::optional<Json> values_failing(const Json& values);

struct Rule {
  std::string name;
  std::string body;
  uint32_t schema_offset = 0;
};

// A schema met while converting: its JSON and where it is (its pointer, or
// that of the schema it was merged from).
struct Node {
  const Json* schema;
  std::string pointer;
};

// Keys added to a cache while an attempt is under way (Converter::Attempt),
// so that a failed attempt can take them back. A cache with one is wired into
// the attempt in three places: its mark in Converter::Attempt (begin_attempt),
// take_back in Converter::failed, and forget_journal once no attempt is left.
template <class Key>
class UndoLog {
 public:
  explicit UndoLog(const int& attempts) : attempts_(attempts) {}
  void added(const Key& key) {
    if (attempts_) keys_.push_back(key);
  }
  size_t mark() const { return keys_.size(); }
  template <class Cache>
  void take_back(size_t mark, Cache& cache) {
    for (size_t i = mark; i < keys_.size(); ++i) cache.erase(keys_[i]);
    keys_.resize(mark);
  }
  void clear() { keys_.clear(); }

 private:
  const int& attempts_;  // attempts under way (the Converter's count)
  std::vector<Key> keys_;
};

// === json_schema.cpp: the parts every family uses =============================

// Where a pointer is in the schema text, and what is said there: errors,
// notes, and warnings of what the grammar accepts beyond the schema
// (errors with --strict), each said once.
class SchemaDiagnostics {
 public:
  SchemaDiagnostics(const JsonLocator& where, const SourceFile& file, Diagnostics& diags, bool strict,
                    const int& attempts)
      : where_(where), file_(file), diags_(diags), strict_(strict), warned_journal_(attempts) {}
  uint32_t offset_of(const std::string& pointer) const;
  SourceRange range_of(const std::string& pointer) const;
  void error(const std::string& pointer, std::string message);
  void note(const std::string& pointer, std::string message);
  // Something ignored that makes the grammar accept more than the schema.
  void permissive(const std::string& pointer, const std::string& message);
  // Whether a diagnostic of this key is said for the first time (each is said once).
  bool first_time(const std::string& key);
  bool has_errors() const { return diags_.has_errors(); }

  struct Mark {
    Diagnostics::Mark diagnostics;
    size_t warned;
  };
  Mark mark() const { return {diags_.mark(), warned_journal_.mark()}; }
  bool errors_since(const Mark& mark) const { return diags_.error_count() > mark.diagnostics.errors; }
  void take_back(const Mark& mark);
  void forget_journal() { warned_journal_.clear(); }

 private:
  const JsonLocator& where_;
  const SourceFile& file_;
  Diagnostics& diags_;
  bool strict_;
  std::set<std::string> warned_;
  UndoLog<std::string> warned_journal_;
};

// The rules written, by name; a rule may be reserved first and given its
// body later (recursion reaches it first).
class RuleSet {
 public:
  explicit RuleSet(const SchemaDiagnostics& diagnostics) : diagnostics_(diagnostics) {}
  // A new rule named after `base` (made unique), for the schema at `pointer`.
  std::string add(std::string base, std::string body, const std::string& pointer);
  size_t reserve(const std::string& base, const std::string& pointer);
  Rule& operator[](size_t i) { return rules_[i]; }
  const std::vector<Rule>& all() const { return rules_; }
  // The rules `start_body` uses, directly or not.
  std::vector<bool> reachable(const std::string& start_body) const;

 private:
  const SchemaDiagnostics& diagnostics_;  // (where a pointer is)
  std::vector<Rule> rules_;
  std::set<std::string> used_names_;
};

// The whitespace of the layout chosen, between the tokens of a JSON value.
class JsonLayout {
 public:
  explicit JsonLayout(JsonWhitespace whitespace) : whitespace_(whitespace) {}
  const char* whitespace_name() const;
  // The depth a rule depends on: only pretty layout's, up to kPrettyDepth + 1.
  int depth(int depth) const;
  // After '{' or '[' (before the first member), between members, before the closing bracket.
  std::string open(int depth) const;
  std::string separator(int depth) const;
  std::string close(int depth) const;
  std::string colon() const;
  std::string empty_container(char open_bracket) const;
  // '[' or '{', the items (already separated), the closing bracket.
  std::string container(char open_bracket, const std::string& items, int depth) const;

 private:
  std::string newline_indent(int depth) const;
  JsonWhitespace whitespace_;
};

// The work the merges do (allOf, and $ref beside other keywords), bounded
// in all. An attempt at an exact form (Converter::Attempt) may take only
// half of what is left, so the loose form always has the other half.
class MergeWork {
 public:
  static constexpr int kMaxMerges = 10000;
  static constexpr size_t kMaxMergeSteps = 100000;  // merge() calls, nested allOf parts included
  static constexpr size_t kMaxAlternativePairs = 256;  // anyOf × anyOf in one merge
  // The JSON of every merged schema, written out.
  static constexpr size_t kMaxMergedBytes = size_t{8} << 20;

  // Each takes one merge, one step or `bytes` of merged JSON: false past the limit.
  bool take_merge() { return ++merges_ <= merges_cap_; }
  bool take_bytes(size_t bytes) { return (merged_bytes_ += bytes) <= merged_bytes_cap_; }
  enum class Step { Taken, FirstRefused, Refused };
  Step take_step();

  struct Caps {
    int merges;
    size_t steps, bytes;
  };
  // Halves what is left; the caps before, for restore().
  Caps halve();
  void restore(const Caps& caps);

 private:
  int merges_ = 0;
  size_t merge_steps_ = 0, merged_bytes_ = 0;
  // The limits in force: the constants', or less in an attempt.
  int merges_cap_ = kMaxMerges;
  size_t merge_steps_cap_ = kMaxMergeSteps;
  size_t merged_bytes_cap_ = kMaxMergedBytes;
};


// === json_schema_combinators.cpp: regexes, patterns and values checked ========

// Whole-text matching of a regex over decoded characters (cgram's syntax),
// and of an ECMAScript pattern (found anywhere); automata kept by their regex.
class TextAutomata {
 public:
  explicit TextAutomata(uint32_t max_nesting) : max_nesting_(max_nesting) {}
  // nullptr: the automaton cannot be made (unreadable, or past the limits).
  const json::CharDfa* regex_automaton(const std::string& regex);
  const json::CharDfa* pattern_automaton(const std::string& pattern);
  // nullopt: the automaton cannot be made.
  std::optional<bool> regex_matches(const std::string& regex, const std::string& text);
  std::optional<bool> pattern_matches(const std::string& pattern, const std::string& text);

 private:
  uint32_t max_nesting_;
  std::map<std::string, std::optional<json::CharDfa>> automata_;
};

// A value, or a member's name, against a schema's keywords.
class SchemaChecks {
 public:
  explicit SchemaChecks(TextAutomata& automata) : automata_(automata) {}
  // Whether `value` meets the keywords beside enum/const that apply to its
  // type (the rest do not apply to it).
  bool satisfies_beside_values(const Json& s, const Json& value);
  // (json_schema_disjoint.cpp) Whether the value fails `s` on a keyword
  // checked here (sound: true only where it certainly fails).
  bool value_fails(const Json& s, const Json& value);
  // A property's schema in `s`: its own and that of every pattern matching
  // its name; additionalProperties (true when absent) where there is neither.
  Json property_schema(const Json& s, const std::string& name);

 private:
  TextAutomata& automata_;
};

// === json_schema_refs.cpp: the schema as a document ============================

// The root schema: what a $ref or an $anchor names, and the draft it declares.
class SchemaDocument {
 public:
  SchemaDocument(const Json& root, SchemaDiagnostics& diagnostics) : root_(root), diagnostics_(diagnostics) {}
  const Json& root() const { return root_; }
  // The schema `ref` names (after an error, nullptr), and its pointer.
  const Json* resolve(const std::string& ref, const std::string& at, std::string& target_pointer);
  // The draft the root's $schema names (4, 6, 7, 2019, 2020; 0 where none),
  // and whether a keyword is one of it: a keyword of another draft is no
  // keyword there (`if` in draft 04, `dependencies` in 2020-12), ignored as
  // the specification says of unknown keywords. With no $schema, every
  // draft's keywords are read.
  int declared_draft() const;
  bool in_draft(const std::string& key) const;
  // Whether the root names draft 04, 06 or 07, where $ref stands alone.
  bool refs_stand_alone() const;
  // (json_schema_disjoint.cpp) The schema a chain of local references leads
  // to; nullptr where one cannot be followed quietly or the reference has
  // constraints beside it.
  const Json* followed(const Json& s) const;

 private:
  const Json* find_anchor(const Json& s, const std::string& name, const std::string& pointer, std::string& found);
  const Json& root_;
  SchemaDiagnostics& diagnostics_;
};

// === json_schema_disjoint.cpp: whether oneOf's alternatives can overlap =======

// Two alternatives not proved disjoint (i < j), with the types of values
// they may both match (those not told apart).
struct Overlap {
  size_t i, j;
  std::set<std::string> types;
};

class OverlapProof {
 public:
  OverlapProof(SchemaDocument& document, TextAutomata& automata, SchemaChecks& checks)
      : document_(document), automata_(automata), checks_(checks) {}
  // The first pair not proved disjoint, if any; `beside` is the rest of the
  // schema, whose types every alternative shares.
  std::optional<std::pair<size_t, size_t>> overlapping(const Json& alternatives, const Json& beside);
  // Every pair not proved disjoint, in order.
  std::vector<Overlap> overlaps(const Json& alternatives, const Json& beside);
  // The types a schema's values may have.
  std::set<std::string> possible_types(const Json& s, int depth = 0);

 private:
  std::set<std::string> overlap_types(const Json& x, const Json& y, int depth, const std::set<std::string>& within);
  bool disjoint_pair(const Json& x, const Json& y, int depth, const std::set<std::string>& within);
  bool told_apart(const Json& a, const Json& b, const std::string& type, int depth);
  static constexpr int kMaxDisjointDepth = 8;  // discriminators nested inside one another
  static constexpr size_t kMaxDisjointSteps = 20000;  // pairs compared for one oneOf
  SchemaDocument& document_;
  TextAutomata& automata_;
  SchemaChecks& checks_;
  size_t disjoint_steps_ = 0;
};

// === json_schema_combinators.cpp: allOf's schemas merged into one =============

class SchemaMerger {
 public:
  SchemaMerger(SchemaDiagnostics& diagnostics, SchemaDocument& document, MergeWork& work, SchemaChecks& checks)
      : diagnostics_(diagnostics), document_(document), work_(work), checks_(checks) {}
  // Both schemas at once, as one schema; nullopt (after an error) where they do not merge.
  std::optional<Json> merge(const Json& a, const Json& b, const std::string& at);

 private:
  bool merge_properties(const Json& a, const Json& b, Json& out, const std::string& at);
  SchemaDiagnostics& diagnostics_;
  SchemaDocument& document_;
  MergeWork& work_;
  SchemaChecks& checks_;
};

// === json_schema_negation.cpp: the complement of a schema =====================

class SchemaComplement {
 public:
  // `around`: schemas the value meets anyway (the context the complement is
  // merged into). A complement of additionalProperties needs one that lists
  // the names an object may have.
  using Around = std::vector<const Json*>;
  SchemaComplement(SchemaDocument& document, TextAutomata& automata, OverlapProof& proof)
      : document_(document), automata_(automata), proof_(proof) {}
  // ¬s as a schema the converter says exactly (no `not` but the strings'
  // own), or nullopt where it cannot be written.
  std::optional<Json> negation(const Json& s, int depth = 0, const Around& around = {});
  // `if`/`then`/`else` as (if ∧ then) ∨ (¬if ∧ else), and dependencies as
  // (no member n) ∨ (n and what it needs): the schema without them, or
  // nullopt where they cannot be said so.
  std::optional<Json> conditional_said(const Json& s);
  std::optional<Json> dependencies_said(const Json& s);
  // oneOf's alternatives, each excluding those it may overlap: nullopt where
  // a complement cannot be written or the union grows past the limit.
  std::optional<std::vector<Json>> exclusive_alternatives(const Json& alternatives, const Json& rest,
                                                          const std::vector<Overlap>& pairs);

 private:
  using Keys = std::optional<std::set<std::string>>;
  std::optional<Json> keyword_failing(const Json& s, const std::string& key, const Json& value, int depth,
                                      const Around& around);
  std::optional<Json> members_failing(const Json& s, const std::string& key, const Json& value, int depth,
                                      const Around& around);
  Keys closed_keys(const Around& around);
  Json within_types(Json failing, const Around& around);
  Json beyond_overlap(Json failing, const std::set<std::string>& overlap);
  Around member_context(const Around& around, const std::string& name);
  static constexpr int kMaxNegationDepth = 8;
  // Alternatives of one complement, of one oneOf branch made exclusive, and
  // of an object's dependencies (2^n for n dependencies).
  static constexpr size_t kMaxNegationAlternatives = 64;
  // Alternatives a oneOf branch made exclusive may distribute into (the
  // product of its complements' alternatives; an attempt bounds the work).
  static constexpr size_t kMaxExclusiveProduct = 256;
  // if/then/else said together on one schema (its own and its allOf parts'):
  // 2^n alternatives of the whole schema.
  static constexpr size_t kMaxConditionals = 3;
  SchemaDocument& document_;
  TextAutomata& automata_;
  OverlapProof& proof_;
};

// === The writers ===============================================================

class Converter;
class CombinatorWriter;

// (json_schema.cpp) The keywords of a schema: refused, ignored (with a
// warning or a note), or said by some family.
class KeywordCheck {
 public:
  KeywordCheck(SchemaDiagnostics& diagnostics, const SchemaDocument& document, const JsonSchemaOptions& options)
      : diagnostics_(diagnostics), document_(document), options_(options) {}
  void check_keywords(const Node& node);

 private:
  bool ignorable_no_op(const std::string& key, const Json& s) const;
  bool property_names_said(const Json& s) const;
  SchemaDiagnostics& diagnostics_;
  const SchemaDocument& document_;
  const JsonSchemaOptions& options_;
};

// (json_schema.cpp) Any value (the schema `true`): one rule per layout depth.
class AnyValueWriter {
 public:
  AnyValueWriter(RuleSet& rules, const JsonLayout& layout) : rules_(rules), layout_(layout) {}
  std::string any_value(int depth);

 private:
  RuleSet& rules_;
  const JsonLayout& layout_;
  std::map<int, std::string> rules_by_depth_;
};

// (json_schema_scalars.cpp) Numbers within their bounds, counts (minLength
// and the like), strings by length, pattern, format and `not`.
class ScalarWriter {
 public:
  ScalarWriter(SchemaDiagnostics& diagnostics, RuleSet& rules, const SyntaxLimits& limits)
      : diagnostics_(diagnostics), rules_(rules), limits_(limits) {}
  Expr number(const Node& node, bool integer);
  Expr string(const Node& node);
  // A count keyword's value (after an error where it is none, nullopt).
  std::optional<uint64_t> count(const Node& node, const char* key);
  // A format cgram does not check: a warning, or a note for an annotation.
  void unchecked_format(const std::string& pointer, const std::string& name);

 private:
  std::optional<json::NumberBound> bound(const Node& node, const char* inclusive_key, const char* exclusive_key,
                                         bool lower);
  enum class Intersection { Done, Empty, TooLarge };
  static constexpr size_t kMaxStringStates = 512;  // of a string's intersected language (docs/LIMITS.md)
  Intersection strings_of(const std::vector<ir::RegexNode>& all, const std::vector<ir::RegexNode>& none,
                          ir::RegexNode& out);
  SchemaDiagnostics& diagnostics_;
  RuleSet& rules_;
  const SyntaxLimits& limits_;
  std::string string_char_rule_;
};

// (json_schema_arrays.cpp) Arrays: items (prefixItems, items, draft-07's
// array items and additionalItems), minItems and maxItems, contains, and
// uniqueItems over a few values.
class ArrayWriter {
 public:
  ArrayWriter(Converter& converter, CombinatorWriter& combinators, SchemaDiagnostics& diagnostics, RuleSet& rules,
              const JsonLayout& layout, const SchemaDocument& document, ScalarWriter& scalars,
              const SyntaxLimits& limits)
      : converter_(converter), combinators_(combinators), diagnostics_(diagnostics), rules_(rules), layout_(layout),
        document_(document), scalars_(scalars), limits_(limits) {}
  Expr array(const Node& node, int depth);

 private:
  // Said exactly: the arrays of distinct values, one rule per set of values
  // used so far (2^k rules for the k values of unique_item_values).
  Expr unique_items(const Node& node, const std::vector<std::vector<Json>>& values, uint64_t min_items,
                    std::optional<uint64_t> max_items, int depth);
  Converter& converter_;
  CombinatorWriter& combinators_;  // (made after this writer: used only once both are)
  SchemaDiagnostics& diagnostics_;
  RuleSet& rules_;
  const JsonLayout& layout_;
  const SchemaDocument& document_;
  ScalarWriter& scalars_;
  const SyntaxLimits& limits_;
};

// (json_schema_other_members.cpp) An object's other members, those whose
// key is none of the names it lists: by the languages its patternProperties
// split the other keys into, by propertyNames, or any other key with
// additionalProperties' value, within the limits on the key regexes.
class OtherMembersWriter {
 public:
  OtherMembersWriter(Converter& converter, CombinatorWriter& combinators, SchemaDiagnostics& diagnostics,
                     const JsonLayout& layout, const SchemaDocument& document, const SyntaxLimits& limits)
      : converter_(converter), combinators_(combinators), diagnostics_(diagnostics), layout_(layout),
        document_(document), limits_(limits) {}
  // The keys each patternProperties pattern matches, in schema order; nullopt
  // (after an error) where a pattern cannot be read.
  struct KeyPattern {
    json::CharDfa keys;
    const Json* schema;
    std::string pointer;
  };
  std::optional<std::vector<KeyPattern>> key_patterns(const Node& node);
  // "key": value of the other members; nullopt with `failed` set after an
  // error, nullopt alone when no such member can appear.
  Expr members(const Node& node, const std::vector<std::string>& names, const std::vector<KeyPattern>& patterns,
               const Json* extra, const std::string& extra_pointer, int depth, bool& failed);

  // The key regexes written so far (a work limit), kept and restored by an attempt.
  struct KeyBudget {
    size_t bytes;
    bool refused;
  };
  KeyBudget key_budget() const { return {key_regex_bytes_, all_key_regexes_refused_}; }
  void restore(const KeyBudget& budget);

 private:
  Expr pattern_members(const Node& node, const std::vector<std::string>& names,
                       const std::vector<KeyPattern>& patterns, const Json* extra, int depth, bool& failed);
  // The regexes of keys other than an object's listed properties: one, and
  // all of them (limits on the time their automata take; docs/LIMITS.md).
  static constexpr size_t kMaxKeyRegexBytes = size_t{128} << 10;
  static constexpr size_t kMaxAllKeyRegexBytes = size_t{512} << 10;
  // Languages the keys of one object are split into by its patternProperties
  // (every set of patterns a key can match together is one).
  static constexpr size_t kMaxKeyRegions = 64;
  Converter& converter_;
  CombinatorWriter& combinators_;  // (made after this writer: used only once both are)
  SchemaDiagnostics& diagnostics_;
  const JsonLayout& layout_;
  const SchemaDocument& document_;
  const SyntaxLimits& limits_;
  size_t key_regex_bytes_ = 0;
  bool all_key_regexes_refused_ = false;  // the limit on all of them is said once
};

// (json_schema_objects.cpp) Objects: the members listed (properties,
// required), in the schema's property order or in any order, each with the
// schemas of the patterns its name matches; minProperties and maxProperties.
class ObjectWriter {
 public:
  ObjectWriter(Converter& converter, CombinatorWriter& combinators, OtherMembersWriter& others,
               SchemaDiagnostics& diagnostics, RuleSet& rules, const JsonLayout& layout,
               const JsonSchemaOptions& options)
      : converter_(converter), combinators_(combinators), others_(others), diagnostics_(diagnostics), rules_(rules),
        layout_(layout), options_(options) {}
  Expr object(const Node& node, int depth);
  // Whether minProperties/maxProperties past 1 are said by counting members
  // (in schema order, bounds up to kMaxCountedMembers), given how many names
  // the object lists.
  static bool counted_members(const Json& s, size_t listed, JsonPropertyOrder order);

 private:
  // An object's members as written: "key": value of each listed one that can
  // appear, whether it is required, and the other members (a key regex and
  // its value), if any.
  struct MemberList {
    const std::vector<std::string>& written;
    const std::vector<bool>& required;
    const Expr& extra;
    std::string separator;
    std::string pointer;
  };
  Expr members_in_order(const MemberList& list, bool& may_be_empty);
  Expr members_any_order(const MemberList& list, bool& may_be_empty);
  Expr members_counted(const MemberList& list, uint64_t at_least, std::optional<uint64_t> at_most);
  static constexpr size_t kMaxAnyOrderMembers = 8;
  static constexpr uint64_t kMaxCountedMembers = 64;  // min/maxProperties, and names listed, counted exactly
  Converter& converter_;
  CombinatorWriter& combinators_;  // (made after this writer: used only once both are)
  OtherMembersWriter& others_;
  SchemaDiagnostics& diagnostics_;
  RuleSet& rules_;
  const JsonLayout& layout_;
  const JsonSchemaOptions& options_;
};

// (json_schema_combinators.cpp) allOf (the merged schema, written once per
// layout depth), anyOf and oneOf (alternatives).
class CombinatorWriter {
 public:
  CombinatorWriter(Converter& converter, SchemaDiagnostics& diagnostics, RuleSet& rules, const JsonLayout& layout,
                   MergeWork& work, SchemaDocument& document, OverlapProof& proof, SchemaMerger& merger,
                   SchemaComplement& complement, const int& attempts)
      : converter_(converter), diagnostics_(diagnostics), rules_(rules), layout_(layout), work_(work),
        document_(document), proof_(proof), merger_(merger), complement_(complement), journal_(attempts) {}
  // The translation of a schema made by merging (allOf, $ref beside other keywords).
  Expr value_of_merged(const Json& merged_source, const std::string& pointer, int depth);
  Expr all_of(const Node& node, int depth);
  Expr any_of(const Node& node, int depth);

  size_t journal_mark() const { return journal_.mark(); }
  void take_back(size_t mark) { journal_.take_back(mark, merged_rules_); }
  void forget_journal() { journal_.clear(); }

 private:
  Converter& converter_;
  SchemaDiagnostics& diagnostics_;
  RuleSet& rules_;
  const JsonLayout& layout_;
  MergeWork& work_;
  SchemaDocument& document_;
  OverlapProof& proof_;
  SchemaMerger& merger_;
  SchemaComplement& complement_;
  // Merged schemas by their text and layout depth: their translation, and
  // the rule made for them when they recur (or are long and met again).
  struct Merged {
    Expr expr;
    std::optional<size_t> rule;
    bool converting = false;
  };
  std::map<std::pair<std::string, int>, Merged> merged_rules_;
  std::vector<std::unique_ptr<Json>> merged_;  // the schemas converted (nodes point into them)
  UndoLog<std::pair<std::string, int>> journal_;
};

// (json_schema_combinators.cpp) enum and const: the values listed that the
// keywords beside them allow, each written as the layout writes it.
class ValueListWriter {
 public:
  ValueListWriter(SchemaDiagnostics& diagnostics, const JsonLayout& layout, ScalarWriter& scalars,
                  TextAutomata& automata, SchemaChecks& checks)
      : diagnostics_(diagnostics), layout_(layout), scalars_(scalars), automata_(automata), checks_(checks) {}
  Expr enumeration(const Node& node, int depth);

 private:
  // A JSON value exactly as the layout writes it.
  std::string literal_value(const Json& v, int depth);
  SchemaDiagnostics& diagnostics_;
  const JsonLayout& layout_;
  ScalarWriter& scalars_;
  TextAutomata& automata_;
  SchemaChecks& checks_;
};

// (json_schema_refs.cpp) $ref: the one rule made for each schema referred to
// (per layout depth), which recursion needs; constraints beside it merged.
class ReferenceWriter {
 public:
  ReferenceWriter(Converter& converter, CombinatorWriter& combinators, SchemaDiagnostics& diagnostics, RuleSet& rules,
                  const JsonLayout& layout, SchemaDocument& document, const int& attempts)
      : converter_(converter), combinators_(combinators), diagnostics_(diagnostics), rules_(rules), layout_(layout),
        document_(document), journal_(attempts) {}
  Expr reference(const Node& node, int depth);
  // The rule for the schema at `pointer` (one for each depth in pretty layout).
  Expr rule_for(const Json* target, const std::string& pointer, int depth);

  size_t journal_mark() const { return journal_.mark(); }
  void take_back(size_t mark) { journal_.take_back(mark, ref_rules_); }
  void forget_journal() { journal_.clear(); }

 private:
  Converter& converter_;
  CombinatorWriter& combinators_;
  SchemaDiagnostics& diagnostics_;
  RuleSet& rules_;
  const JsonLayout& layout_;
  SchemaDocument& document_;
  std::map<std::pair<std::string, int>, Expr> ref_rules_;
  UndoLog<std::pair<std::string, int>> journal_;
};

// === json_schema.cpp: the facade ===============================================

class Converter {
 public:
  Converter(const Json& root, const JsonLocator& where, const SourceFile& file, Diagnostics& diags,
            const JsonSchemaOptions& options, const SyntaxLimits& limits);
  // The parts hold references to one another and to the Converter: a copy's
  // would point into the original.
  Converter(const Converter&) = delete;
  Converter& operator=(const Converter&) = delete;

  std::optional<SchemaTranslation> run();
  // After run(): it failed because the schema accepts no value at all.
  bool accepts_no_value() const { return no_value_; }

  // A schema's translation, by its keyword family (nullopt: no value).
  Expr value(const Node& node, int depth);

  // --- Trying an exact form first ----------------------------------------------
  // A keyword said exactly through complements (oneOf, not, if, dependencies)
  // may pass a limit where the loose form would not: the attempt's errors,
  // work and cache entries are then taken back, and the loose form (with its
  // warning) is written instead. The work an attempt does stays counted (the
  // limits bound all of it), but an attempt may take only half of what is
  // left, so the loose form always has the other half.
  struct Attempt {
    SchemaDiagnostics::Mark diagnostics;
    size_t merged_keys, ref_keys;
    MergeWork::Caps caps;
    OtherMembersWriter::KeyBudget keys;
  };
  Attempt begin_attempt();
  // Ends the attempt: whether it failed (an error), in which case it is taken back.
  bool failed(const Attempt& attempt);

 private:
  Expr value_inner(const Node& node, int depth);
  // (json_schema_scalars.cpp) A schema by the types it allows.
  Expr by_type(const Node& node, int depth);
  // A schema with `not` said with its other keywords, where that is exact.
  std::optional<Json> not_said_otherwise(const Json& s);

  JsonSchemaOptions options_;
  SyntaxLimits limits_;
  const SourceFile& file_;
  int attempts_ = 0;      // attempts under way
  uint32_t nesting_ = 0;  // value() calls under way, through references too
  bool no_value_ = false;  // run() found that the schema accepts nothing
  SchemaDiagnostics diagnostics_;
  RuleSet rules_;
  JsonLayout layout_;
  MergeWork work_;
  TextAutomata automata_;
  SchemaChecks checks_;
  SchemaDocument document_;
  OverlapProof proof_;
  SchemaMerger merger_;
  SchemaComplement complement_;
  KeywordCheck keywords_;
  AnyValueWriter any_value_;
  ScalarWriter scalars_;
  ArrayWriter arrays_;
  OtherMembersWriter others_;
  ObjectWriter objects_;
  CombinatorWriter combinators_;
  ValueListWriter values_;
  ReferenceWriter references_;
};

}  // namespace cgram::json_schema_detail
