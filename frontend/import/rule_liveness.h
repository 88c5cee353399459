#pragma once
// Which rules of a generated .cgram text can finish (some finite text
// derives them) and which a set of roots reaches. A tool list's
// translation asks it which tools accept no call at all, so that one dead
// tool is left out (with a warning naming it) instead of failing the list
// with an "unproductive rule" error about a name the user never wrote.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ast.h"

namespace cgram {

class RuleLiveness {
 public:
  // Moved, never copied: bodies_ points into grammar_'s rules.
  RuleLiveness(RuleLiveness&&) = default;
  RuleLiveness& operator=(RuleLiveness&&) = default;
  RuleLiveness(const RuleLiveness&) = delete;
  RuleLiveness& operator=(const RuleLiveness&) = delete;

  // Nullopt when the text does not parse (the compile will say why).
  static std::optional<RuleLiveness> read(std::string_view text);

  bool productive(const std::string& rule) const { return productive_.count(rule) > 0; }
  // The rules the roots use, the roots included.
  std::set<std::string> reachable(const std::vector<std::string>& roots) const;

 private:
  RuleLiveness() = default;
  bool finishes(const ast::Expr& e) const;
  static void names_in(const ast::Expr& e, std::vector<std::string>& out);

  ast::Grammar grammar_;
  std::map<std::string, std::vector<const ast::Expr*>> bodies_;
  std::set<std::string> productive_;
};

}  // namespace cgram
