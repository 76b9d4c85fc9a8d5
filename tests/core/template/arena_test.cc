// The per-render arena (arena.h): aligned pieces it owns, reused after a reset, large
// pieces left to the heap; Values made in a RenderArena's scope and outside one; renders
// that make and drop many objects give Python Jinja's output, again and again, on several
// threads at once (each render's reference counts are its own).
#include "core/template/arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/template/value.h"
#include "render_helper.h"

namespace kvgate::jinja {
// Named after the file: the tests compile in unity batches.
namespace arena_test {

// Builds and drops strings, lists, dicts, a namespace, loops and macro calls.
constexpr const char* kBusy =
    "{% macro m(x) %}[{{ x }}]{% endmacro %}"
    "{% set ns = namespace(s='') %}"
    "{% for i in range(200) %}{% set d = {'k': i, 'l': [i, i * 2]} %}"
    "{% set ns.s = ns.s ~ m(d.k) %}{% if loop.last %}{{ d.l|tojson }}{% endif %}{% endfor %}"
    "{{ ns.s|length }}";

TEST(TemplateArena, AllocatesAlignedPiecesItOwns) {
  Arena a;
  void* p = a.try_allocate(24, 8);
  ASSERT_TRUE(p != nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 8, 0u);
  void* q = a.try_allocate(3, 1);
  ASSERT_TRUE(q != nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 8, 0u);
  EXPECT_NE(p, q);
  EXPECT_TRUE(a.owns(p));
  EXPECT_TRUE(a.owns(q));
  int local = 0;
  EXPECT_FALSE(a.owns(&local));
  EXPECT_TRUE(a.try_allocate(Arena::kMaxPiece + 1, 8) == nullptr);  // large: the caller's heap
  EXPECT_TRUE(a.try_allocate(0, 8) == nullptr);
  a.reset();
  EXPECT_EQ(a.try_allocate(24, 8), p);  // from the start again
}

TEST(TemplateArena, GrowsPastItsFirstBlockAndStartsOverAfterAReset) {
  Arena a;
  std::vector<void*> pieces;
  for (int i = 0; i < 100; ++i) pieces.push_back(a.try_allocate(4000, 8));  // ~400 KB
  for (void* p : pieces) {
    ASSERT_TRUE(p != nullptr);
    EXPECT_TRUE(a.owns(p));
  }
  a.reset();
  for (int i = 0; i < 100; ++i) {
    void* p = a.try_allocate(4000, 8);
    ASSERT_TRUE(p != nullptr);
    EXPECT_TRUE(a.owns(p));
  }
}

TEST(TemplateArena, RenderArenaIsCurrentForItsScope) {
  EXPECT_TRUE(current_arena() == nullptr);
  {
    RenderArena outer;
    Arena* a = current_arena();
    ASSERT_TRUE(a != nullptr);
    {
      RenderArena inner;  // a render inside a chat render: the same arena
      EXPECT_EQ(current_arena(), a);
    }
    EXPECT_EQ(current_arena(), a);
    const Value s = Value::string("made in the arena");
    EXPECT_EQ(s.str(), "made in the arena");
    EXPECT_TRUE(a->owns(s.str().data()));
    const ValueList items{Value::integer(1), s};
    EXPECT_TRUE(a->owns(items.data()));
    const Value list = Value::list(items);
    EXPECT_EQ(to_str(list), "[1, 'made in the arena']");
  }
  EXPECT_TRUE(current_arena() == nullptr);
  const Value heap = Value::string("made on the heap");
  EXPECT_EQ(heap.str(), "made on the heap");
}

TEST(TemplateArena, RendersTheSameEveryTime) {
  for (int i = 0; i < 3; ++i) EXPECT_EQ(testing::render(kBusy), "[199, 398]890");
  // Strings longer than an arena piece come from the heap, and are freed as they go.
  const char* longer =
      "{% set ns = namespace(s='') %}{% for i in range(3000) %}"
      "{% set ns.s = ns.s ~ 'abcdefghij' %}{% endfor %}{{ ns.s|length }} {{ ns.s[-3:] }}";
  for (int i = 0; i < 2; ++i) EXPECT_EQ(testing::render(longer), "30000 hij");
}

TEST(TemplateArena, RendersOnSeveralThreadsAtOnce) {
  auto t = Template::compile(kBusy);
  ASSERT_TRUE(t.ok()) << t.error();
  const Template& tpl = *t;
  std::vector<std::string> got(4);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < got.size(); ++k) {
    threads.emplace_back([&tpl, &got, k] {
      for (int i = 0; i < 20; ++i) {
        auto out = tpl.render(Value::new_dict());
        got[k] = out.ok() ? *out : "error: " + out.error();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const std::string& g : got) EXPECT_EQ(g, "[199, 398]890");
}

}  // namespace arena_test
}  // namespace kvgate::jinja
