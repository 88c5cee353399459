#pragma once
// The graph-structured stack itself: nodes (an LR state each) and edges to
// their parents, appended in order, so that a mark is three sizes and a
// rollback a resize; each node's shiftability entries (one per terminal
// with an action in its state); compaction to the nodes some reading still
// reaches. One of the engine's parts (engine.h): the engine reduces and
// shifts over it (reductions.cpp), this holds it.
//
// Edges are only ever added to nodes made in the same reduction or shift,
// or to a node just made by merging readings (which may take an older
// node's list as its tail: lists are only ever prepended to), so the nodes
// before a mark never gain edges after it.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "key_set.h"

namespace cgram {

class StackGraph {
 public:
  static constexpr uint32_t kNoEdge = UINT32_MAX;
  // A node with many parents (an ambiguous grammar joins every earlier
  // level) finds an edge in a hash set instead of its list: the list scan
  // made such grammars quadratic per step. Keys are (serial, parent): a
  // surviving node's parents survive with it, and serials are never reused.
  static constexpr uint32_t kIndexDegree = 16;
  struct Node {
    uint32_t state;
    uint32_t first_edge;
    uint32_t status;  // its first shiftability entry
    uint32_t serial;  // unique while the graph lives: node slots are reused
    uint32_t degree = 0;       // edges to parents
    uint32_t index_epoch = 0;  // edge_epoch_ when its edges were put in edge_index_
  };
  struct Edge {
    uint32_t parent;
    uint32_t next;
  };
  struct Size {
    size_t nodes = 0, edges = 0, status = 0;
  };

  const Node& node(uint32_t v) const { return nodes_[v]; }
  const Edge& edge(uint32_t e) const { return edges_[e]; }
  size_t node_count() const { return nodes_.size(); }
  size_t edge_count() const { return edges_.size(); }
  size_t status_count() const { return status_.size(); }
  size_t elements() const { return nodes_.size() + edges_.size(); }
  Size size() const { return {nodes_.size(), edges_.size(), status_.size()}; }
  // Shiftability entry i (0 unknown, 1 shiftable, 2 not), by its index.
  uint8_t& status(size_t i) { return status_[i]; }

  // A node in `state` with `status_entries` shiftability entries, no parent.
  uint32_t add_node(uint32_t state, size_t status_entries);
  // The edge node → parent, unless it is there (false then).
  bool add_edge(uint32_t node, uint32_t parent);
  // One the node surely lacks.
  void push_edge(uint32_t node, uint32_t parent);
  // `node` (just made, no parent yet) takes `tail`'s parents, sharing its list.
  void share_parents(uint32_t node, uint32_t tail);
  // Back to an earlier size (nodes after it gone, none before it changed).
  void truncate(Size size);
  void clear();

  // Keeps the nodes some root reaches, and their edges and entries, in
  // their order. `node_to` gets each old node's new index (kDropped if
  // gone); `before(size)` then maps an old mark to the new one.
  static constexpr uint32_t kDropped = UINT32_MAX;
  struct Compaction {
    std::vector<uint32_t> node_to, nodes_before, edges_before, status_before;
    Size before(Size old) const {
      return {nodes_before[old.nodes], edges_before[old.edges], status_before[old.status]};
    }
  };
  Compaction compact(std::span<const uint32_t> roots);

 private:
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  std::vector<uint8_t> status_;
  uint32_t next_serial_ = 1;
  KeySet edge_index_;
  uint32_t edge_epoch_ = 1;
};

}  // namespace cgram
