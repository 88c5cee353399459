#pragma once
// The JSON Schema → .cgram converter behind json_schema.h, shared by its
// translation units (json_schema*.cpp) and by nothing else. Each section of
// Converter below names the file that defines it.
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

// --- Shared helpers (json_schema.cpp) ----------------------------------------

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
// (json_schema_scalars.cpp) multipleOf as 10^e, which numbers' spelling says exactly;
// as m·10^-e, which a remainder automaton of kMaxMultipleStates at most says.
std::optional<int> power_of_ten_step(const Json& s);
inline constexpr uint64_t kMaxMultipleStates = 4000;
std::optional<std::pair<uint64_t, uint32_t>> decimal_step(const Json& s);

// (json_schema_combinators.cpp) Whether values of a declared type set may
// have type `t` ("number" takes "integer"); a value's JSON type ("integer"
// for a whole number); JSON Schema equality (1 equals 1.0, objects unordered).
bool type_allows(const std::set<std::string>& types, const std::string& t);
std::string json_type_of(const Json& v);
bool json_equal(const Json& a, const Json& b);

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

class Converter {
 public:
  Converter(const Json& root, const JsonLocator& where, const SourceFile& file, Diagnostics& diags,
            const JsonSchemaOptions& options, const SyntaxLimits& limits)
      : root_(root), where_(where), file_(file), diags_(diags), options_(options), limits_(limits) {}

  std::optional<SchemaTranslation> run();
  // After run(): it failed because the schema accepts no value at all.
  bool accepts_no_value() const { return no_value_; }

 private:
  // === json_schema.cpp: the driver ============================================
  std::vector<bool> reachable(const std::string& start_body) const;

  // --- Diagnostics -----------------------------------------------------------
  SourceRange range_of(const std::string& pointer) const;
  void error(const std::string& pointer, std::string message);
  void permissive(const std::string& pointer, const std::string& message);
  // Whether a diagnostic of this key is said for the first time (each is said once).
  bool first_time(const std::string& key);
  const char* whitespace_name() const;

  // --- Trying an exact form first ----------------------------------------------
  // A keyword said exactly through complements (oneOf, not, if, dependencies)
  // may pass a limit where the loose form would not: the attempt's errors,
  // work and cache entries are then taken back, and the loose form (with its
  // warning) is written instead.
  // The work an attempt does stays counted (the limits bound all of it),
  // but an attempt may take only half of what is left, so the loose form
  // always has the other half.
  struct Attempt {
    Diagnostics::Mark diagnostics;
    size_t merged_keys, ref_keys, warned_keys;
    int merges_cap;
    size_t merge_steps_cap, merged_bytes_cap, key_regex_bytes;
    bool all_key_regexes_refused;
  };
  Attempt begin_attempt();
  // Ends the attempt: whether it failed (an error), in which case it is taken back.
  bool failed(const Attempt& attempt);

  // --- Layout ----------------------------------------------------------------
  int layout_depth(int depth) const;
  std::string newline_indent(int depth) const;
  std::string open(int depth) const;
  std::string separator(int depth) const;
  std::string close(int depth) const;
  std::string colon() const;
  std::string empty_container(char open_bracket) const;
  std::string container(char open_bracket, const std::string& items, int depth) const;

  std::string add_rule(std::string base, std::string body, const std::string& pointer);
  size_t reserve_rule(const std::string& base, const std::string& pointer);

  // --- Any value (the schema `true`) -----------------------------------------
  std::string any_value(int depth);

  // --- Schemas ----------------------------------------------------------------
  Expr value(const Node& node, int depth);
  Expr value_inner(const Node& node, int depth);
  void check_keywords(const Node& node);
  static bool known_meta_schema(const Json& uri);
  bool ignorable_no_op(const std::string& key, const Json& s) const;
  bool property_names_said(const Json& s) const;
  static size_t listed_names(const Json& s);  // in properties and required
  // Whether the types a schema declares are strings at most.
  static bool only_strings(const Json& s);
  std::optional<Json> not_said_otherwise(const Json& s);

  // === json_schema_refs.cpp: $ref =============================================
  const Json* resolve(const std::string& ref, const std::string& at, std::string& target_pointer);
  const Json* find_anchor(const Json& s, const std::string& name, const std::string& pointer, std::string& found);
  Expr reference(const Node& node, int depth);
  bool refs_stand_alone() const;
  // The draft the root's $schema names (4, 6, 7, 2019, 2020; 0 where none),
  // and whether a keyword is one of it: a keyword of another draft is no
  // keyword there (`if` in draft 04, `dependencies` in 2020-12), ignored as
  // the specification says of unknown keywords. With no $schema, every
  // draft's keywords are read.
  int declared_draft() const;
  bool in_draft(const std::string& key) const;
  Expr rule_for(const Json* target, const std::string& pointer, int depth);

  // === json_schema_combinators.cpp: allOf, anyOf, oneOf, enum, const ==========
  // --- allOf -------------------------------------------------------------------
  Expr value_of_merged(const Json& merged_source, const std::string& pointer, int depth);
  Expr all_of(const Node& node, int depth);
  std::optional<Json> merge(const Json& a, const Json& b, const std::string& at);
  static bool greater(const Json& x, const Json& y);
  // Whole-text matching of a regex over decoded characters, and of an
  // ECMAScript pattern (found anywhere); automata kept by their regex.
  const json::CharDfa* regex_automaton(const std::string& regex);
  const json::CharDfa* pattern_automaton(const std::string& pattern);
  // nullopt: the automaton cannot be made (unreadable, or past the limits).
  std::optional<bool> regex_matches(const std::string& regex, const std::string& text);
  std::optional<bool> pattern_matches(const std::string& pattern, const std::string& text);
  Json property_schema(const Json& s, const std::string& name);
  static Json both(const Json& x, const Json& y);
  bool merge_properties(const Json& a, const Json& b, Json& out, const std::string& at);
  static Json item_schema(const Json& s, size_t i);
  static void merge_items(const Json& a, const Json& b, Json& out);

  // --- anyOf, oneOf -------------------------------------------------------------
  Expr any_of(const Node& node, int depth);
  static Expr alternation(const std::vector<std::string>& alternatives);

  // === json_schema_disjoint.cpp: whether oneOf's alternatives can overlap =====
  std::optional<std::pair<size_t, size_t>> overlapping(const Json& alternatives, const Json& beside);
  // Every pair not proved disjoint (i < j), in order; with the types of
  // values they may both match (those not told apart).
  std::vector<std::pair<size_t, size_t>> overlapping_pairs(const Json& alternatives, const Json& beside);
  struct Overlap {
    size_t i, j;
    std::set<std::string> types;
  };
  std::vector<Overlap> overlaps(const Json& alternatives, const Json& beside);
  std::set<std::string> overlap_types(const Json& x, const Json& y, int depth, const std::set<std::string>& within);
  bool disjoint_pair(const Json& x, const Json& y, int depth, const std::set<std::string>& within);
  bool told_apart(const Json& a, const Json& b, const std::string& type, int depth);
  const Json* followed(const Json& s) const;
  bool value_fails(const Json& s, const Json& value);
  std::set<std::string> possible_types(const Json& s, int depth = 0);
  static constexpr int kMaxDisjointDepth = 8;  // discriminators nested inside one another
  static constexpr size_t kMaxDisjointSteps = 20000;  // pairs compared for one oneOf
  size_t disjoint_steps_ = 0;

  // === json_schema_negation.cpp: the complement of a schema ===================
  // ¬s as a schema the converter says exactly (no `not` but the strings'
  // own), or nullopt where it cannot be written.
  // `around`: schemas the value meets anyway (the context the complement is
  // merged into). A complement of additionalProperties needs one that lists
  // the names an object may have.
  using Around = std::vector<const Json*>;
  using Keys = std::optional<std::set<std::string>>;
  std::optional<Json> negation(const Json& s, int depth = 0, const Around& around = {});
  std::optional<Json> keyword_failing(const Json& s, const std::string& key, const Json& value, int depth,
                                      const Around& around);
  std::optional<Json> members_failing(const Json& s, const std::string& key, const Json& value, int depth,
                                      const Around& around);
  Keys closed_keys(const Around& around);
  Json within_types(Json failing, const Around& around);
  Json beyond_overlap(Json failing, const std::set<std::string>& overlap);
  Around member_context(const Around& around, const std::string& name);
  static std::optional<Json> values_failing(const Json& values);
  // `if`/`then`/`else` as (if ∧ then) ∨ (¬if ∧ else), and dependencies as
  // (no member n) ∨ (n and what it needs): the schema without them, or
  // nullopt where they cannot be said so.
  std::optional<Json> conditional_said(const Json& s);
  std::optional<Json> dependencies_said(const Json& s);
  // oneOf's alternatives, each excluding those it may overlap: nullopt where
  // a complement cannot be written or the union grows past the limit.
  std::optional<std::vector<Json>> exclusive_alternatives(const Json& alternatives, const Json& rest,
                                                          const std::vector<Overlap>& pairs);
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

  // --- enum, const ---------------------------------------------------------------
  Expr enumeration(const Node& node, int depth);
  bool satisfies_beside_values(const Json& s, const Json& value);
  std::string literal_value(const Json& v, int depth);

  // === json_schema_scalars.cpp: types, numbers, strings =======================
  static std::set<std::string> declared_types(const Json& s);
  Expr by_type(const Node& node, int depth);
  std::optional<json::NumberBound> bound(const Node& node, const char* inclusive_key, const char* exclusive_key,
                                         bool lower);
  Expr number(const Node& node, bool integer);
  std::optional<uint64_t> count(const Node& node, const char* key);
  Expr string(const Node& node);
  void unchecked_format(const std::string& pointer, const std::string& name);
  // A format some draft defines (others are annotations).
  static bool specified_format(const std::string& name);
  enum class Intersection { Done, Empty, TooLarge };
  static constexpr size_t kMaxStringStates = 512;  // of a string's intersected language (docs/LIMITS.md)
  Intersection strings_of(const std::vector<ir::RegexNode>& all, const std::vector<ir::RegexNode>& none,
                       ir::RegexNode& out);
  static std::optional<std::string> excluded_strings(const Json& s);
  static std::optional<std::string> strings_excluded_by(const Json& inner, const std::set<std::string>& types);

  // === json_schema_containers.cpp: arrays, objects ============================
  Expr array(const Node& node, int depth);
  // `contains` said by the array's grammar: one item matches it, with no
  // other bound on the items (no maxItems, maxContains, prefixItems).
  static bool simple_contains(const Json& s);
  // uniqueItems where the items are a few values (an enum or const of at
  // most kMaxUniqueValues, or booleans) and nothing else bounds them but
  // minItems and maxItems: the distinct values (each with the spellings the
  // schema lists for it, as an object in two member orders), else nullopt
  // (the keyword is ignored with a warning). Said exactly by unique_items:
  // the arrays of distinct values, one rule per set of values used so far
  // (2^k rules).
  static std::optional<std::vector<std::vector<Json>>> unique_item_values(const Json& s);
  static constexpr size_t kMaxUniqueValues = 8;
  Expr unique_items(const Node& node, const std::vector<std::vector<Json>>& values, uint64_t min_items,
                    std::optional<uint64_t> max_items, int depth);
  Expr object(const Node& node, int depth);
  // An object's members as written: "key": value of each listed one that can
  // appear, whether it is required, and the additional members (a key regex
  // and its value), if any.
  struct MemberList {
    const std::vector<std::string>& written;
    const std::vector<bool>& required;
    const Expr& extra;
    std::string separator;
    std::string pointer;
  };
  Expr members_in_order(const MemberList& list, bool& may_be_empty);
  Expr members_any_order(const MemberList& list, bool& may_be_empty);
  static constexpr size_t kMaxAnyOrderMembers = 8;
  bool counted_members(const Json& s, size_t listed) const;
  Expr members_counted(const MemberList& list, uint64_t at_least, std::optional<uint64_t> at_most);
  static constexpr uint64_t kMaxCountedMembers = 64;  // min/maxProperties, and names listed, counted exactly
  struct KeyPattern {
    json::CharDfa keys;
    const Json* schema;
    std::string pointer;
  };
  std::optional<std::vector<KeyPattern>> key_patterns(const Node& node);
  Expr other_members(const Node& node, const std::vector<std::string>& names, const std::vector<KeyPattern>& patterns,
                     const Json* extra, int depth, bool& failed);

  // === State ===================================================================
  static constexpr int kMaxMerges = 10000;
  static constexpr size_t kMaxMergeSteps = 100000;  // merge() calls, nested allOf parts included
  static constexpr size_t kMaxAlternativePairs = 256;  // anyOf × anyOf in one merge
  size_t merge_steps_ = 0;
  // The limits in force: the constants', or less in an attempt.
  int merges_cap_ = kMaxMerges;
  size_t merge_steps_cap_ = kMaxMergeSteps;
  size_t merged_bytes_cap_ = kMaxMergedBytes;

  const Json& root_;
  const JsonLocator& where_;
  const SourceFile& file_;
  Diagnostics& diags_;
  JsonSchemaOptions options_;
  SyntaxLimits limits_;
  std::vector<Rule> rules_;
  std::set<std::string> used_names_;
  std::map<std::pair<std::string, int>, Expr> ref_rules_;
  // Merged schemas by their text and layout depth: their translation, and
  // the rule made for them when they recur (or are long and met again).
  struct Merged {
    Expr expr;
    std::optional<size_t> rule;
    bool converting = false;
  };
  static constexpr size_t kInlineBytes = 200;
  // The regexes of keys other than an object's listed properties: one, and
  // all of them (limits on the time their automata take; docs/LIMITS.md).
  static constexpr size_t kMaxKeyRegexBytes = size_t{128} << 10;
  static constexpr size_t kMaxAllKeyRegexBytes = size_t{512} << 10;
  size_t key_regex_bytes_ = 0;
  bool all_key_regexes_refused_ = false;  // the limit on all of them is said once
  bool no_value_ = false;                 // run() found that the schema accepts nothing
  // Languages the keys of one object are split into by its patternProperties
  // (every set of patterns a key can match together is one).
  static constexpr size_t kMaxKeyRegions = 64;
  // The JSON of every merged schema, written out (a work limit).
  static constexpr size_t kMaxMergedBytes = size_t{8} << 20;
  size_t merged_bytes_ = 0;
  std::map<std::pair<std::string, int>, Merged> merged_rules_;
  std::map<int, std::string> any_rules_;
  std::vector<std::unique_ptr<Json>> merged_;
  std::set<std::string> warned_;
  // Keys added to merged_rules_, ref_rules_ and warned_ while an attempt is under way.
  int attempts_ = 0;
  std::vector<std::pair<std::string, int>> merged_journal_, ref_journal_;
  std::vector<std::string> warned_journal_;
  std::map<std::string, std::optional<json::CharDfa>> text_automata_;  // regex_matches, by regex
  std::string string_char_rule_;
  uint32_t nesting_ = 0;  // value() calls under way, through references too
  int merges_ = 0;
};

}  // namespace cgram::json_schema_detail
