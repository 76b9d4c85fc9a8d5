// An index list: a doubly-linked list threaded through a vector's elements by index, each
// element holding its own `prev` and `next` (kIndexNil ends the list), the list itself
// only its two ends. No allocation; O(1) to take an element out or put it at either end.
// The LRU orders of BlockPool, HostTier and SessionAffinity are index lists.
//
//   struct Node { uint32_t prev = kIndexNil, next = kIndexNil; ... };
//   std::vector<Node> nodes(n);
//   IndexList order;
//   order.push_back(nodes, 3);
//   order.unlink(nodes, 3);
#pragma once

#include <cstdint>

namespace kvgate {

inline constexpr uint32_t kIndexNil = UINT32_MAX;

struct IndexList {
  uint32_t head = kIndexNil;
  uint32_t tail = kIndexNil;

  // Takes element i out of the list (it must be in it); its links are then kIndexNil.
  template <typename Items>
  void unlink(Items& items, uint32_t i) {
    auto& e = items[i];
    if (e.prev != kIndexNil) {
      items[e.prev].next = e.next;
    } else {
      head = e.next;
    }
    if (e.next != kIndexNil) {
      items[e.next].prev = e.prev;
    } else {
      tail = e.prev;
    }
    e.prev = e.next = kIndexNil;
  }

  // Puts element i (in no list) at the head.
  template <typename Items>
  void push_front(Items& items, uint32_t i) {
    auto& e = items[i];
    e.prev = kIndexNil;
    e.next = head;
    if (head != kIndexNil) {
      items[head].prev = i;
    } else {
      tail = i;
    }
    head = i;
  }

  // Puts element i (in no list) at the tail.
  template <typename Items>
  void push_back(Items& items, uint32_t i) {
    auto& e = items[i];
    e.next = kIndexNil;
    e.prev = tail;
    if (tail != kIndexNil) {
      items[tail].next = i;
    } else {
      head = i;
    }
    tail = i;
  }
};

}  // namespace kvgate
