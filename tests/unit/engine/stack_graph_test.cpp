// The graph-structured stack on its own (engine/stack_graph.h): edges found
// once (by list and, past kIndexDegree parents, by the index), marks and
// rollback, serials never reused, a merged node sharing its tail's parents,
// and compaction keeping what the roots reach in order, marks moved with it.
#include <catch2/catch.hpp>

#include <vector>

#include "stack_graph.h"

using namespace cgram;

namespace {
std::vector<uint32_t> parents(const StackGraph& g, uint32_t v) {
  std::vector<uint32_t> out;
  for (uint32_t e = g.node(v).first_edge; e != StackGraph::kNoEdge; e = g.edge(e).next) out.push_back(g.edge(e).parent);
  return out;
}
}  // namespace

TEST_CASE("stack graph: an edge is added once, by its list or by the index past kIndexDegree parents",
          "[engine-unit]") {
  StackGraph g;
  const uint32_t bottom = g.add_node(0, 2);
  const uint32_t top = g.add_node(7, 3);
  CHECK(g.node(top).state == 7);
  CHECK(g.node(top).status == 2);  // after the bottom's two entries
  CHECK(g.status_count() == 5);
  CHECK(g.add_edge(top, bottom));
  CHECK_FALSE(g.add_edge(top, bottom));
  CHECK(g.node(top).degree == 1);
  // A node on many parents: each is added once, the index answering from
  // kIndexDegree on.
  const uint32_t wide = g.add_node(9, 0);
  std::vector<uint32_t> levels;
  for (uint32_t i = 0; i < 3 * StackGraph::kIndexDegree; ++i) levels.push_back(g.add_node(1, 0));
  for (uint32_t p : levels) CHECK(g.add_edge(wide, p));
  for (uint32_t p : levels) CHECK_FALSE(g.add_edge(wide, p));
  CHECK(g.node(wide).degree == levels.size());
  const std::vector<uint32_t> found = parents(g, wide);
  CHECK(std::vector<uint32_t>(found.rbegin(), found.rend()) == levels);  // lists are prepended to
  CHECK(g.elements() == g.node_count() + g.edge_count());
}

TEST_CASE("stack graph: a truncation is a rollback, and serials are never reused", "[engine-unit]") {
  StackGraph g;
  const uint32_t bottom = g.add_node(0, 1);
  const StackGraph::Size mark = g.size();
  const uint32_t serial_before = g.node(bottom).serial;
  const uint32_t a = g.add_node(3, 2);
  g.push_edge(a, bottom);
  g.status(g.node(a).status) = 1;
  g.truncate(mark);
  CHECK(g.node_count() == 1);
  CHECK(g.edge_count() == 0);
  CHECK(g.status_count() == 1);
  const uint32_t b = g.add_node(3, 2);
  CHECK(b == a);  // the slot is reused
  CHECK(g.node(b).serial > serial_before + 1);  // its serial is not
  CHECK(g.status(g.node(b).status) == 0);  // nor its entries' values
  CHECK(g.node(b).degree == 0);
  g.clear();
  CHECK(g.node_count() == 0);
  CHECK(g.add_node(0, 0) == 0);
}

TEST_CASE("stack graph: a merged node shares its tail's parents, and gains its own above them", "[engine-unit]") {
  StackGraph g;
  const uint32_t p1 = g.add_node(1, 0), p2 = g.add_node(2, 0), tail = g.add_node(5, 0);
  g.push_edge(tail, p1);
  g.push_edge(tail, p2);
  const uint32_t merged = g.add_node(5, 0);
  g.share_parents(merged, tail);
  const uint32_t p3 = g.add_node(3, 0);
  CHECK(g.add_edge(merged, p3));
  CHECK_FALSE(g.add_edge(merged, p1));  // found in the shared tail
  CHECK(parents(g, merged) == std::vector<uint32_t>{p3, p2, p1});
  CHECK(parents(g, tail) == std::vector<uint32_t>{p2, p1});  // the tail is unchanged
}

TEST_CASE("stack graph: compaction keeps what the roots reach, in order, with its entries, and moves marks",
          "[engine-unit]") {
  StackGraph g;
  const uint32_t bottom = g.add_node(0, 1);
  const uint32_t dead = g.add_node(4, 2);  // reached by no root
  g.push_edge(dead, bottom);
  const uint32_t mid = g.add_node(6, 3);
  g.push_edge(mid, bottom);
  const StackGraph::Size mark = g.size();
  const uint32_t top = g.add_node(8, 1);
  g.push_edge(top, mid);
  g.status(g.node(mid).status + 2) = 2;
  g.status(g.node(top).status) = 1;
  const uint32_t mid_serial = g.node(mid).serial;
  const uint32_t roots[] = {top};
  const StackGraph::Compaction c = g.compact(roots);
  CHECK(c.node_to[dead] == StackGraph::kDropped);
  CHECK(c.node_to[bottom] == 0);
  CHECK(c.node_to[mid] == 1);
  CHECK(c.node_to[top] == 2);
  REQUIRE(g.node_count() == 3);
  CHECK(g.edge_count() == 2);
  CHECK(g.status_count() == 5);  // 1 + 3 + 1: the dead node's two are gone
  CHECK(g.node(1).state == 6);
  CHECK(g.node(1).serial == mid_serial);
  CHECK(g.status(g.node(1).status + 2) == 2);
  CHECK(g.status(g.node(2).status) == 1);
  CHECK(parents(g, 2) == std::vector<uint32_t>{1});
  CHECK(parents(g, 1) == std::vector<uint32_t>{0});
  const StackGraph::Size moved = c.before(mark);
  CHECK(moved.nodes == 2);
  CHECK(moved.edges == 1);
  CHECK(moved.status == 4);
  // Edges are still found once after the move.
  CHECK_FALSE(g.add_edge(2, 1));
}
