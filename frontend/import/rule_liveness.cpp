#include "rule_liveness.h"

#include "diagnostics.h"
#include "parse.h"
#include "source.h"

namespace cgram {

std::optional<RuleLiveness> RuleLiveness::read(std::string_view text) {
  SourceFile file("<rules>", std::string(text));
  Diagnostics diags(&file);
  RuleLiveness out;
  out.grammar_ = parse_grammar(file, diags);
  if (diags.has_errors()) return std::nullopt;
  for (const ast::RuleDef& rule : out.grammar_.rules) out.bodies_[rule.name].push_back(&rule.body);
  // The least fixed point: a rule finishes once one of its bodies does.
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [name, bodies] : out.bodies_) {
      if (out.productive_.count(name)) continue;
      for (const ast::Expr* body : bodies)
        if (out.finishes(*body)) {
          out.productive_.insert(name);
          grew = true;
          break;
        }
    }
  }
  return out;
}

bool RuleLiveness::finishes(const ast::Expr& e) const {
  switch (e.kind) {
    case ast::ExprKind::Literal:
    case ast::ExprKind::Regex:  // the translators write no regex of an empty language
    case ast::ExprKind::AnyToken:
    case ast::ExprKind::Except: return true;
    case ast::ExprKind::RuleRef: return productive_.count(e.text) > 0;
    case ast::ExprKind::Sequence:
      for (const ast::Expr& c : e.children)
        if (!finishes(c)) return false;
      return true;
    case ast::ExprKind::Alternation:
      for (const ast::Expr& c : e.children)
        if (finishes(c)) return true;
      return false;
    case ast::ExprKind::Repeat: return e.min == 0 || (!e.children.empty() && finishes(e.children[0]));
  }
  return false;
}

void RuleLiveness::names_in(const ast::Expr& e, std::vector<std::string>& out) {
  if (e.kind == ast::ExprKind::RuleRef) out.push_back(e.text);
  for (const ast::Expr& c : e.children) names_in(c, out);
}

std::set<std::string> RuleLiveness::reachable(const std::vector<std::string>& roots) const {
  std::set<std::string> seen;
  std::vector<std::string> work(roots.begin(), roots.end());
  while (!work.empty()) {
    std::string name = std::move(work.back());
    work.pop_back();
    if (!seen.insert(name).second) continue;
    if (auto it = bodies_.find(name); it != bodies_.end())
      for (const ast::Expr* body : it->second) names_in(*body, work);
  }
  return seen;
}

}  // namespace cgram
