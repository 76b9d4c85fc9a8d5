// The per-render arena. While a RenderArena lives on a thread, the Values made on that
// thread (strings, lists, dicts, loop and macro objects, and the vectors inside them) take
// their memory from a bump allocator: freeing one is a no-op, and the render touches malloc
// only to grow the arena. When the outermost RenderArena ends, the arena is reset and its
// memory reused by the thread's next render. Outside a RenderArena, Values use the heap.
//
//   {
//     jinja::RenderArena scope;              // before any Value of the render
//     jinja::Value ctx = ...;                // built in the arena
//     auto out = tpl.render(ctx);            // the output is a std::string on the heap
//   }                                        // every Value made above is gone here
//
// REQUIRES: no Value made inside a RenderArena outlives it (value.h: Values never outlive
// the render that made them, except through the output text). Under ASan the memory of a
// reset arena is poisoned, so a Value that escapes is reported where it is next read.
//
// Pieces above kMaxPiece, and everything once the arena holds kMaxBytes, come from the heap
// and are freed as usual: a template that builds ever longer strings in a loop frees them
// as it goes, as it did without the arena.
//
// Thread-safety: one arena per thread; a render runs on one thread.
//
// Internal to the template engine (template.h is the public interface).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

namespace kvgate::jinja {

class Arena {
 public:
  static constexpr size_t kMaxPiece = 4 << 10;
  static constexpr size_t kFirstBlock = 64 << 10;
  static constexpr size_t kMaxBytes = 8 << 20;  // beyond this, the heap
  static constexpr size_t kMaxKept = 1 << 20;   // kept for the next render

  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // n bytes aligned to align (a power of two; at least 8 is used), or null when the piece
  // is large or the arena is full: the caller then takes it from the heap.
  void* try_allocate(size_t n, size_t align) {
    if (n == 0 || n > kMaxPiece) return nullptr;
    if (align < 8) align = 8;
    const uintptr_t at = (cur_ + (align - 1)) & ~static_cast<uintptr_t>(align - 1);
    if (at + n > end_) return grow(n, align);
    cur_ = at + n;
    unpoison(at, n);
    return reinterpret_cast<void*>(at);
  }
  // Whether p points into this arena's memory.
  bool owns(const void* p) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    for (const Block& b : blocks_) {
      const auto begin = reinterpret_cast<uintptr_t>(b.data.get());
      if (a >= begin && a < begin + b.size) return true;
    }
    return false;
  }
  // Forgets every piece; keeps one block as large as this render used (up to kMaxKept).
  void reset();

 private:
  struct Block {
    std::unique_ptr<char[]> data;
    size_t size = 0;
  };
  void* grow(size_t n, size_t align);
  static void unpoison(uintptr_t at, size_t n);
  void poison_all();

  std::vector<Block> blocks_;
  uintptr_t cur_ = 0;
  uintptr_t end_ = 0;
  size_t total_ = 0;  // bytes in blocks_
};

// The arena of this thread's current RenderArena, or null.
Arena* current_arena() noexcept;

class RenderArena {
 public:
  RenderArena();
  ~RenderArena();
  RenderArena(const RenderArena&) = delete;
  RenderArena& operator=(const RenderArena&) = delete;

 private:
  bool outermost_;  // an inner scope (a render inside ChatTemplate::render) does nothing
};

// A std allocator over the arena that was current when it was made (the heap when none
// was). A copied container takes the arena current at the copy.
template <typename T>
class ArenaAllocator {
 public:
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using propagate_on_container_copy_assignment = std::false_type;
  using is_always_equal = std::false_type;

  ArenaAllocator() noexcept : arena_(current_arena()) {}
  explicit ArenaAllocator(Arena* arena) noexcept : arena_(arena) {}
  template <typename U>
  ArenaAllocator(const ArenaAllocator<U>& other) noexcept : arena_(other.arena()) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (arena_) {
      if (void* p = arena_->try_allocate(bytes, alignof(T))) return static_cast<T*>(p);
    }
    return static_cast<T*>(::operator new(bytes));
  }
  void deallocate(T* p, size_t) noexcept {
    if (arena_ && arena_->owns(p)) return;
    ::operator delete(p);
  }
  ArenaAllocator select_on_container_copy_construction() const noexcept { return ArenaAllocator(); }
  Arena* arena() const noexcept { return arena_; }

  friend bool operator==(const ArenaAllocator& a, const ArenaAllocator& b) noexcept {
    return a.arena_ == b.arena_;
  }

 private:
  Arena* arena_;
};

}  // namespace kvgate::jinja
