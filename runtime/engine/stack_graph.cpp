#include "stack_graph.h"

#include <algorithm>

namespace cgram {

uint32_t StackGraph::add_node(uint32_t state, size_t status_entries) {
  nodes_.push_back({state, kNoEdge, static_cast<uint32_t>(status_.size()), next_serial_++});
  status_.resize(status_.size() + status_entries, 0);
  return static_cast<uint32_t>(nodes_.size() - 1);
}

bool StackGraph::add_edge(uint32_t node, uint32_t parent) {
  Node& n = nodes_[node];
  if (n.degree < kIndexDegree) {
    for (uint32_t e = n.first_edge; e != kNoEdge; e = edges_[e].next)
      if (edges_[e].parent == parent) return false;
  } else {
    auto key = [&](uint32_t p) { return uint64_t{n.serial} << 32 | p; };
    if (n.index_epoch != edge_epoch_) {
      // Stale keys (of truncated nodes) are dropped now and then: the set
      // stays within a few times the edges alive.
      if (edge_index_.size() > std::max<size_t>(size_t{1} << 16, 4 * edges_.size())) {
        edge_index_.clear();
        ++edge_epoch_;
      }
      for (uint32_t e = n.first_edge; e != kNoEdge; e = edges_[e].next) edge_index_.insert(key(edges_[e].parent));
      n.index_epoch = edge_epoch_;
    }
    if (!edge_index_.insert(key(parent))) return false;
  }
  push_edge(node, parent);
  return true;
}

void StackGraph::push_edge(uint32_t node, uint32_t parent) {
  Node& n = nodes_[node];
  edges_.push_back({parent, n.first_edge});
  n.first_edge = static_cast<uint32_t>(edges_.size() - 1);
  ++n.degree;
}

void StackGraph::share_parents(uint32_t node, uint32_t tail) {
  nodes_[node].first_edge = nodes_[tail].first_edge;
  nodes_[node].degree = nodes_[tail].degree;
}

void StackGraph::truncate(Size size) {
  nodes_.resize(size.nodes);
  status_.resize(size.status);
  edges_.resize(size.edges);
}

void StackGraph::clear() { truncate({}); }

StackGraph::Compaction StackGraph::compact(std::span<const uint32_t> roots) {
  Compaction c;
  std::vector<uint32_t>& node_to = c.node_to;
  node_to.assign(nodes_.size(), kDropped);
  std::vector<uint8_t> edge_live(edges_.size(), 0);
  std::vector<uint32_t> stack;
  auto reach = [&](uint32_t v) {
    if (node_to[v] == kDropped) node_to[v] = 0, stack.push_back(v);
  };
  for (uint32_t v : roots) reach(v);
  while (!stack.empty()) {
    const uint32_t v = stack.back();
    stack.pop_back();
    for (uint32_t e = nodes_[v].first_edge; e != kNoEdge; e = edges_[e].next) {
      edge_live[e] = 1;
      reach(edges_[e].parent);
    }
  }
  // How many live nodes, edges and entries come before each old index: the
  // new indices, and where each mark goes. A node's entries run up to the
  // next node's first (nodes and their entries are appended together).
  c.nodes_before.assign(nodes_.size() + 1, 0);
  c.edges_before.assign(edges_.size() + 1, 0);
  c.status_before.assign(status_.size() + 1, 0);
  std::vector<uint8_t> status_live(status_.size(), 0);
  for (uint32_t v = 0; v < nodes_.size(); ++v) {
    c.nodes_before[v + 1] = c.nodes_before[v] + (node_to[v] != kDropped);
    if (node_to[v] == kDropped) continue;
    node_to[v] = c.nodes_before[v];
    const size_t end = v + 1 < nodes_.size() ? nodes_[v + 1].status : status_.size();
    std::fill(status_live.begin() + nodes_[v].status, status_live.begin() + static_cast<std::ptrdiff_t>(end), 1);
  }
  for (size_t e = 0; e < edges_.size(); ++e) c.edges_before[e + 1] = c.edges_before[e] + edge_live[e];
  for (size_t i = 0; i < status_.size(); ++i) c.status_before[i + 1] = c.status_before[i] + status_live[i];
  auto new_edge = [&](uint32_t e) { return e == kNoEdge ? kNoEdge : c.edges_before[e]; };
  std::vector<Node> nodes;
  nodes.reserve(c.nodes_before.back());
  for (uint32_t v = 0; v < nodes_.size(); ++v) {
    if (node_to[v] == kDropped) continue;
    Node n = nodes_[v];
    n.first_edge = new_edge(n.first_edge);
    n.status = c.status_before[n.status];
    nodes.push_back(n);
  }
  std::vector<Edge> edges;
  edges.reserve(c.edges_before.back());
  for (size_t e = 0; e < edges_.size(); ++e)
    if (edge_live[e]) edges.push_back({node_to[edges_[e].parent], new_edge(edges_[e].next)});
  std::vector<uint8_t> status;
  status.reserve(c.status_before.back());
  for (size_t i = 0; i < status_.size(); ++i)
    if (status_live[i]) status.push_back(status_[i]);
  nodes_ = std::move(nodes);
  edges_ = std::move(edges);
  status_ = std::move(status);
  // Keys hold parents' indices, which moved.
  edge_index_.clear();
  ++edge_epoch_;
  return c;
}

}  // namespace cgram
