#include "core/common/drain.h"

#include <algorithm>

namespace kvgate {

DrainPlan drain_plan(Nanos grace) {
  grace = std::max<Nanos>(grace, 0);
  DrainPlan p;
  p.end = grace;
  p.refuse_queued_at = grace - std::min<Nanos>(kSecond, grace / 2);
  p.answer_unstarted_at = grace - std::min<Nanos>(250 * kMillisecond, grace / 4);
  return p;
}

}  // namespace kvgate
