#include "core/kv/prefix_index.h"

#include <algorithm>

namespace kvgate::kv {

void merge_matches(std::vector<EndpointMatch>& a, std::span<const EndpointMatch> b) {
  for (const EndpointMatch& m : b) {
    auto it = std::find_if(a.begin(), a.end(),
                           [&](const EndpointMatch& x) { return x.endpoint == m.endpoint; });
    if (it == a.end()) {
      a.push_back(m);
    } else {
      it->gpu_blocks = std::max(it->gpu_blocks, m.gpu_blocks);
      if (m.total_blocks > it->total_blocks) {
        it->disk_blocks = m.disk_blocks;
      } else if (m.total_blocks == it->total_blocks) {
        it->disk_blocks = std::min(it->disk_blocks, m.disk_blocks);
      }
      it->total_blocks = std::max(it->total_blocks, m.total_blocks);
    }
  }
}

}  // namespace kvgate::kv
