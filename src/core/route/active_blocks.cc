#include "core/route/active_blocks.h"

#include <algorithm>
#include <cassert>
#include <cstddef>

namespace kvgate::route {
namespace {
constexpr uint32_t kNil = 0xffffffffu;
constexpr uint32_t kRoot = 0;
}  // namespace

// The trie. Node 0 is the root (no edge, no holders). Every other node is reached from
// its parent by its edge, a run of one or more keys; `refs` counts, per endpoint, the
// in-flight requests whose key sequence runs through the whole edge (a request ends at
// a node, never inside an edge: adding one splits the edge there). Along a path the
// counts only shrink, so an endpoint holding a node's keys holds its ancestors' too.
//
// A child is found by (parent, its edge's first key) in an open-addressing table
// (linear probing, backward-shift deletion); a node's children are also listed in it,
// for the merges. Freed nodes keep their vectors' room for the next ones.
struct ActiveBlocks::Trie {
  struct Holder {
    kv::EndpointId endpoint;
    uint32_t refs;
  };
  struct Node {
    uint32_t parent = kNil;
    uint32_t total = 0;              // the holders' refs together; 0: a free node
    std::vector<kv::BlockKey> edge;  // the keys from the parent to here
    std::vector<Holder> holders;     // by endpoint, ascending
    std::vector<uint32_t> children;  // in no order
  };
  struct Slot {
    kv::BlockKey key = 0;
    uint32_t parent = kNil;  // kNil: empty
    uint32_t node = kNil;
  };

  std::vector<Node> nodes = std::vector<Node>(1);
  std::vector<uint32_t> free_nodes;
  std::vector<Slot> slots = std::vector<Slot>(64);
  uint32_t shift = 64 - 6;
  size_t used = 0;
  size_t keys = 0;             // the live nodes' edges together
  std::vector<uint32_t> path;  // scratch for release()

  static constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;
  size_t home(uint32_t parent, kv::BlockKey key) const {
    return static_cast<size_t>(((key ^ (uint64_t{parent} * kMul)) * kMul) >> shift);
  }
  size_t mask() const { return slots.size() - 1; }

  size_t find_slot(uint32_t parent, kv::BlockKey key) const {
    size_t i = home(parent, key);
    while (slots[i].parent != kNil && (slots[i].parent != parent || slots[i].key != key)) {
      i = (i + 1) & mask();
    }
    return i;
  }
  // The child of `parent` whose edge starts with `key`, or kNil.
  uint32_t child(uint32_t parent, kv::BlockKey key) const {
    return slots[find_slot(parent, key)].node;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots);
    slots.assign(old.size() * 2, Slot{});
    --shift;
    for (const Slot& s : old) {
      if (s.parent != kNil) slots[find_slot(s.parent, s.key)] = s;
    }
  }
  void link(uint32_t parent, kv::BlockKey key, uint32_t node) {
    if ((used + 1) * 2 > slots.size()) grow();
    Slot& s = slots[find_slot(parent, key)];
    assert(s.parent == kNil);
    s = {key, parent, node};
    ++used;
  }
  void unlink(uint32_t parent, kv::BlockKey key) {
    size_t i = find_slot(parent, key);
    assert(slots[i].parent != kNil);
    size_t j = i;
    for (;;) {
      j = (j + 1) & mask();
      if (slots[j].parent == kNil) break;
      const size_t h = home(slots[j].parent, slots[j].key);
      // Move j back to i unless its home lies cyclically in (i, j].
      const bool between = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (!between) {
        slots[i] = slots[j];
        i = j;
      }
    }
    slots[i] = Slot{};
    --used;
  }

  uint32_t new_node() {
    if (!free_nodes.empty()) {
      const uint32_t v = free_nodes.back();
      free_nodes.pop_back();
      return v;
    }
    nodes.emplace_back();
    return static_cast<uint32_t>(nodes.size() - 1);
  }
  void free_node(uint32_t v) {
    Node& n = nodes[v];
    n.parent = kNil;
    n.total = 0;
    n.edge.clear();
    n.holders.clear();
    n.children.clear();
    free_nodes.push_back(v);
  }

  static void replace_child(Node& parent, uint32_t from, uint32_t to) {
    *std::find(parent.children.begin(), parent.children.end(), from) = to;
  }
  static void drop_child(Node& parent, uint32_t v) {
    auto it = std::find(parent.children.begin(), parent.children.end(), v);
    *it = parent.children.back();
    parent.children.pop_back();
  }

  // Where endpoint e's holder is in n, or would go.
  static std::vector<Holder>::iterator holder_at(Node& n, kv::EndpointId e) {
    return std::lower_bound(n.holders.begin(), n.holders.end(), e,
                            [](const Holder& h, kv::EndpointId x) { return h.endpoint < x; });
  }
  static Holder* holder(Node& n, kv::EndpointId e) {
    auto it = holder_at(n, e);
    return it != n.holders.end() && it->endpoint == e ? &*it : nullptr;
  }

  // A new leaf under `parent` with edge `rest`, held by no one yet.
  uint32_t add_leaf(uint32_t parent, std::span<const kv::BlockKey> rest) {
    const uint32_t v = new_node();
    Node& n = nodes[v];
    n.parent = parent;
    n.edge.assign(rest.begin(), rest.end());
    nodes[parent].children.push_back(v);
    link(parent, rest[0], v);
    keys += rest.size();
    return v;
  }

  // Splits v's edge after its first m keys (0 < m < its size): a new node takes them,
  // with v's holders, and v hangs under it with the rest. Returns the new node.
  uint32_t split(uint32_t v, size_t m) {
    const uint32_t w = new_node();
    Node& upper = nodes[w];
    Node& lower = nodes[v];
    assert(m > 0 && m < lower.edge.size());
    upper.parent = lower.parent;
    upper.total = lower.total;
    upper.holders = lower.holders;
    upper.edge.assign(lower.edge.begin(), lower.edge.begin() + static_cast<ptrdiff_t>(m));
    upper.children.push_back(v);
    lower.edge.erase(lower.edge.begin(), lower.edge.begin() + static_cast<ptrdiff_t>(m));
    // The parent's entry for the first key now leads to the upper node.
    slots[find_slot(upper.parent, upper.edge[0])].node = w;
    replace_child(nodes[upper.parent], v, w);
    lower.parent = w;
    link(w, lower.edge[0], v);
    return w;
  }

  // Removes v (no request passes through it, nor through its children: there are none).
  void remove(uint32_t v) {
    Node& n = nodes[v];
    assert(n.total == 0 && n.children.empty());
    unlink(n.parent, n.edge[0]);
    drop_child(nodes[n.parent], v);
    keys -= n.edge.size();
    free_node(v);
  }

  // Merges v into its only child when no request ends at v (then every request through
  // v goes on into the child: the same holders): the child's edge takes v's in front.
  void merge(uint32_t v) {
    if (v == kRoot) return;
    Node& n = nodes[v];
    if (n.children.size() != 1) return;
    const uint32_t c = n.children[0];
    Node& ch = nodes[c];
    if (ch.total != n.total) return;  // a request ends at v
    unlink(v, ch.edge[0]);
    ch.edge.insert(ch.edge.begin(), n.edge.begin(), n.edge.end());
    ch.parent = n.parent;
    slots[find_slot(n.parent, n.edge[0])].node = c;
    replace_child(nodes[n.parent], v, c);
    free_node(v);
  }
};

ActiveBlocks::ActiveBlocks() : trie_(std::make_unique<Trie>()) {}
ActiveBlocks::~ActiveBlocks() = default;

namespace {
// How many leading keys of `edge` equal those of `keys` from `pos` on.
size_t common(const std::vector<kv::BlockKey>& edge, std::span<const kv::BlockKey> keys,
              size_t pos) {
  const size_t n = std::min(edge.size(), keys.size() - pos);
  const kv::BlockKey* a = edge.data();
  const kv::BlockKey* b = keys.data() + pos;
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}
}  // namespace

uint32_t ActiveBlocks::add(kv::EndpointId endpoint, std::span<const kv::BlockKey> keys) {
  if (per_endpoint_.size() <= endpoint) per_endpoint_.resize(endpoint + 1, 0);
  Trie& t = *trie_;
  const size_t n = keys.size();
  uint32_t added = 0;
  uint32_t at = kRoot;
  size_t pos = 0;
  while (pos < n) {
    uint32_t v = t.child(at, keys[pos]);
    size_t m;
    if (v == kNil) {
      v = t.add_leaf(at, keys.subspan(pos));
      m = n - pos;
    } else {
      m = common(t.nodes[v].edge, keys, pos);
      assert(m > 0);
      if (m < t.nodes[v].edge.size()) v = t.split(v, m);
    }
    Trie::Node& node = t.nodes[v];
    ++node.total;
    if (auto it = Trie::holder_at(node, endpoint);
        it != node.holders.end() && it->endpoint == endpoint) {
      ++it->refs;
    } else {
      node.holders.insert(it, {endpoint, 1});
      added += static_cast<uint32_t>(m);
    }
    pos += m;
    at = v;
  }
  per_endpoint_[endpoint] += added;
  return added;
}

uint32_t ActiveBlocks::release(kv::EndpointId endpoint, std::span<const kv::BlockKey> keys) {
  Trie& t = *trie_;
  const size_t n = keys.size();
  uint32_t freed = 0;
  t.path.clear();
  uint32_t at = kRoot;
  size_t pos = 0;
  while (pos < n) {
    const uint32_t v = t.child(at, keys[pos]);
    if (v == kNil) break;
    Trie::Node& node = t.nodes[v];
    const size_t m = node.edge.size();
    if (m > n - pos || common(node.edge, keys, pos) != m) break;  // not a request's path
    Trie::Holder* h = Trie::holder(node, endpoint);
    if (h == nullptr) break;
    if (--h->refs == 0) {
      freed += static_cast<uint32_t>(m);
      node.holders.erase(node.holders.begin() + (h - node.holders.data()));
    }
    --node.total;
    t.path.push_back(v);
    pos += m;
    at = v;
  }
  // Deepest first: the nodes no request passes through any more go, then the ones left
  // with a single child and no request ending there merge into it.
  for (size_t i = t.path.size(); i-- > 0;) {
    const uint32_t v = t.path[i];
    if (t.nodes[v].total == 0) {
      t.remove(v);
    } else {
      t.merge(v);
    }
  }
  if (endpoint < per_endpoint_.size()) {
    assert(per_endpoint_[endpoint] >= freed);
    per_endpoint_[endpoint] -= freed;
  }
  return freed;
}

void ActiveBlocks::prefix(std::span<const kv::BlockKey> keys, std::vector<Prefix>& out) const {
  const Trie& t = *trie_;
  const size_t n = keys.size();
  uint32_t at = kRoot;
  uint32_t first = kNil;  // the first node on the path: its holders are everyone's
  size_t pos = 0;
  while (pos < n) {
    const uint32_t v = t.child(at, keys[pos]);
    if (v == kNil) break;
    const Trie::Node& node = t.nodes[v];
    const size_t m = common(node.edge, keys, pos);
    if (first == kNil) {
      first = v;
      for (const Trie::Holder& h : node.holders) {
        if (reach_.size() <= h.endpoint) reach_.resize(h.endpoint + 1, 0);
      }
    }
    // Every holder of this node holds the keys matched on its edge; deeper nodes' holders
    // are among these, so the last value written is the endpoint's reach.
    for (const Trie::Holder& h : node.holders) reach_[h.endpoint] = static_cast<uint32_t>(pos + m);
    if (m < node.edge.size()) break;
    pos += m;
    at = v;
  }
  if (first == kNil) return;
  for (const Trie::Holder& h : t.nodes[first].holders)
    out.push_back({h.endpoint, reach_[h.endpoint]});
}

uint64_t ActiveBlocks::blocks(kv::EndpointId endpoint) const {
  return endpoint < per_endpoint_.size() ? per_endpoint_[endpoint] : 0;
}

void ActiveBlocks::remove_endpoint(kv::EndpointId endpoint) {
  if (endpoint >= per_endpoint_.size() || per_endpoint_[endpoint] == 0) return;
  Trie& t = *trie_;
  // Its holders go; then the nodes nobody passes through (whole subtrees: counts shrink
  // along a path), leaves first; then the merges the removals allow.
  std::vector<uint32_t> emptied;
  for (uint32_t v = 1; v < t.nodes.size(); ++v) {
    Trie::Node& node = t.nodes[v];
    if (node.total == 0) continue;
    if (Trie::Holder* h = Trie::holder(node, endpoint)) {
      node.total -= h->refs;
      node.holders.erase(node.holders.begin() + (h - node.holders.data()));
      if (node.total == 0) emptied.push_back(v);
    }
  }
  // Children before parents: a node is removed once it has no children left.
  while (!emptied.empty()) {
    bool progress = false;
    for (size_t i = 0; i < emptied.size();) {
      if (t.nodes[emptied[i]].children.empty()) {
        t.remove(emptied[i]);
        emptied[i] = emptied.back();
        emptied.pop_back();
        progress = true;
      } else {
        ++i;
      }
    }
    assert(progress);
    if (!progress) break;
  }
  for (uint32_t v = 1; v < t.nodes.size(); ++v) {
    if (t.nodes[v].total != 0) t.merge(v);
  }
  per_endpoint_[endpoint] = 0;
}

size_t ActiveBlocks::size() const { return trie_->keys; }

}  // namespace kvgate::route
