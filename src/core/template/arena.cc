#include "core/template/arena.h"

#include <algorithm>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace kvgate::jinja {
namespace {

thread_local Arena* t_current = nullptr;

Arena& thread_arena() {
  thread_local Arena arena;
  return arena;
}

}  // namespace

void Arena::unpoison([[maybe_unused]] uintptr_t at, [[maybe_unused]] size_t n) {
#if defined(__SANITIZE_ADDRESS__)
  ASAN_UNPOISON_MEMORY_REGION(reinterpret_cast<void*>(at), n);
#endif
}

void Arena::poison_all() {
#if defined(__SANITIZE_ADDRESS__)
  for (const Block& b : blocks_) ASAN_POISON_MEMORY_REGION(b.data.get(), b.size);
#endif
}

void* Arena::grow(size_t n, size_t align) {
  const size_t last = blocks_.empty() ? 0 : blocks_.back().size;
  const size_t size = std::max({kFirstBlock, 2 * last, n + align});
  if (total_ + size > kMaxBytes) return nullptr;
  Block b;
  b.data = std::make_unique_for_overwrite<char[]>(size);
  b.size = size;
  cur_ = reinterpret_cast<uintptr_t>(b.data.get());
  end_ = cur_ + size;
  total_ += size;
  blocks_.push_back(std::move(b));
#if defined(__SANITIZE_ADDRESS__)
  ASAN_POISON_MEMORY_REGION(blocks_.back().data.get(), size);
#endif
  return try_allocate(n, align);
}

void Arena::reset() {
  if (blocks_.empty()) return;
  if (blocks_.size() > 1 || total_ > kMaxKept) {
    const size_t keep = std::min(total_, kMaxKept);
    blocks_.clear();
    total_ = 0;
    Block b;
    b.data = std::make_unique_for_overwrite<char[]>(keep);
    b.size = keep;
    total_ = keep;
    blocks_.push_back(std::move(b));
  }
  cur_ = reinterpret_cast<uintptr_t>(blocks_[0].data.get());
  end_ = cur_ + blocks_[0].size;
  poison_all();
}

Arena* current_arena() noexcept { return t_current; }

RenderArena::RenderArena() : outermost_(t_current == nullptr) {
  if (outermost_) t_current = &thread_arena();
}

RenderArena::~RenderArena() {
  if (!outermost_) return;
  t_current = nullptr;
  thread_arena().reset();
}

}  // namespace kvgate::jinja
