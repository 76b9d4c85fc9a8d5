#include "core/metrics/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace kvgate::metrics {
namespace {

void append_escaped(std::string& out, std::string_view s, bool quote_escape) {
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote_escape) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void append_labels(std::string& out, const Labels& labels, std::string_view extra_key = {},
                   std::string_view extra_value = {}) {
  if (labels.empty() && extra_key.empty()) return;
  out += '{';
  bool first = true;
  auto one = [&](std::string_view k, std::string_view v) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    append_escaped(out, v, true);
    out += '"';
  };
  for (const auto& [k, v] : labels) one(k, v);
  if (!extra_key.empty()) one(extra_key, extra_value);
  out += '}';
}

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }

// A cursor over one line.
struct LineReader {
  std::string_view s;
  size_t i = 0;
  void skip_spaces() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  }
  bool done() const { return i >= s.size(); }
  std::string_view name() {
    const size_t b = i;
    if (i < s.size() && is_name_start(s[i])) {
      ++i;
      while (i < s.size() && is_name_char(s[i])) ++i;
    }
    return s.substr(b, i - b);
  }
  std::string_view token() {
    const size_t b = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    return s.substr(b, i - b);
  }
};

std::optional<double> parse_double(std::string_view t) {
  if (t == "+Inf" || t == "Inf" || t == "+inf" || t == "inf") {
    return std::numeric_limits<double>::infinity();
  }
  if (t == "-Inf" || t == "-inf") return -std::numeric_limits<double>::infinity();
  if (t == "NaN" || t == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (!t.empty() && t[0] == '+') t.remove_prefix(1);
  double v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size() || t.empty()) return std::nullopt;
  return v;
}

Status parse_labels(LineReader& r, Labels& out) {
  // At '{'.
  ++r.i;
  while (true) {
    r.skip_spaces();
    if (r.done()) return Error("unterminated label set");
    if (r.s[r.i] == '}') {
      ++r.i;
      return {};
    }
    std::string_view key = r.name();
    if (key.empty()) return Error("bad label name");
    r.skip_spaces();
    if (r.done() || r.s[r.i] != '=') return Error("expected '=' after label name");
    ++r.i;
    r.skip_spaces();
    if (r.done() || r.s[r.i] != '"') return Error("expected '\"' to open a label value");
    ++r.i;
    std::string value;
    bool closed = false;
    while (!r.done()) {
      char c = r.s[r.i++];
      if (c == '"') {
        closed = true;
        break;
      }
      if (c == '\\') {
        if (r.done()) break;
        char e = r.s[r.i++];
        value += e == 'n' ? '\n' : e;  // \\ -> \, \" -> ", \n -> newline
      } else {
        value += c;
      }
    }
    if (!closed) return Error("unterminated label value");
    out.emplace_back(std::string(key), std::move(value));
    r.skip_spaces();
    if (!r.done() && r.s[r.i] == ',') ++r.i;
  }
}

bool labels_match(const Labels& have, const Labels& want) {
  for (const auto& [k, v] : want) {
    bool found = false;
    for (const auto& [hk, hv] : have) {
      if (hk == k && hv == v) {
        found = true;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  (void)ec;
  return std::string(buf, p);
}

void PrometheusWriter::header(std::string_view name, std::string_view help, std::string_view type) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  append_escaped(out_, help, false);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void PrometheusWriter::sample(std::string_view name, const Labels& labels, double value) {
  out_ += name;
  append_labels(out_, labels);
  out_ += ' ';
  out_ += format_value(value);
  out_ += '\n';
}

void PrometheusWriter::counter(std::string_view name, std::string_view help, const Labels& labels,
                               double v) {
  header(name, help, "counter");
  sample(name, labels, v);
}

void PrometheusWriter::gauge(std::string_view name, std::string_view help, const Labels& labels,
                             double v) {
  header(name, help, "gauge");
  sample(name, labels, v);
}

void PrometheusWriter::histogram(std::string_view name, std::string_view help, const Labels& labels,
                                 const HistogramSnapshot& h) {
  header(name, help, "histogram");
  histogram_series(name, labels, h);
}

void PrometheusWriter::histogram_series(std::string_view name, const Labels& labels,
                                        const HistogramSnapshot& h) {
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    cumulative += h.counts[i];
    const std::string le = i < h.bounds.size() ? format_value(h.bounds[i]) : "+Inf";
    out_ += bucket;
    append_labels(out_, labels, "le", le);
    out_ += ' ';
    out_ += format_value(static_cast<double>(cumulative));
    out_ += '\n';
  }
  sample(std::string(name) + "_count", labels, static_cast<double>(h.count));
  sample(std::string(name) + "_sum", labels, h.sum);
}

const std::string* Sample::label(std::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return &v;
  }
  return nullptr;
}

const Sample* MetricSet::find(std::string_view name, const Labels& match) const {
  for (const Sample& s : samples) {
    if (s.name == name && labels_match(s.labels, match)) return &s;
  }
  return nullptr;
}

std::optional<double> MetricSet::value(std::string_view name, const Labels& match) const {
  const Sample* s = find(name, match);
  if (!s) return std::nullopt;
  return s->value;
}

std::vector<const Sample*> MetricSet::all(std::string_view name, const Labels& match) const {
  std::vector<const Sample*> out;
  for (const Sample& s : samples) {
    if (s.name == name && labels_match(s.labels, match)) out.push_back(&s);
  }
  return out;
}

std::string MetricSet::type_of(std::string_view family) const {
  for (const MetricFamily& f : families) {
    if (f.name == family) return f.type;
  }
  return "";
}

Result<MetricSet> parse_prometheus_text(std::string_view text) {
  MetricSet set;
  size_t line_no = 0;
  size_t pos = 0;
  auto family = [&](std::string_view name) -> MetricFamily& {
    for (MetricFamily& f : set.families) {
      if (f.name == name) return f;
    }
    set.families.push_back(MetricFamily{std::string(name), "", ""});
    return set.families.back();
  };
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    LineReader r{line};
    r.skip_spaces();
    if (r.done()) continue;
    auto fail = [&](const std::string& m) {
      return Error("prometheus text line " + std::to_string(line_no) + ": " + m);
    };
    if (line[r.i] == '#') {
      ++r.i;
      r.skip_spaces();
      std::string_view kind = r.token();
      if (kind != "HELP" && kind != "TYPE") continue;  // a plain comment
      r.skip_spaces();
      std::string_view name = r.name();
      if (name.empty()) return fail("bad metric name after # " + std::string(kind));
      r.skip_spaces();
      std::string_view rest = line.substr(r.i);
      if (kind == "TYPE") {
        family(name).type = std::string(rest);
      } else {
        std::string help;
        for (size_t i = 0; i < rest.size(); ++i) {
          if (rest[i] == '\\' && i + 1 < rest.size()) {
            ++i;
            help += rest[i] == 'n' ? '\n' : rest[i];
          } else {
            help += rest[i];
          }
        }
        family(name).help = std::move(help);
      }
      continue;
    }
    Sample s;
    std::string_view name = r.name();
    if (name.empty()) return fail("bad metric name");
    s.name = std::string(name);
    r.skip_spaces();
    if (!r.done() && line[r.i] == '{') {
      if (Status st = parse_labels(r, s.labels); !st) return fail(st.error());
    }
    r.skip_spaces();
    auto v = parse_double(r.token());
    if (!v) return fail("bad sample value");
    s.value = *v;
    r.skip_spaces();
    if (!r.done()) {
      std::string_view ts = r.token();
      int64_t t = 0;
      auto [p, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), t);
      if (ec != std::errc() || p != ts.data() + ts.size()) return fail("bad timestamp");
      s.timestamp_ms = t;
      r.skip_spaces();
      if (!r.done()) return fail("trailing characters");
    }
    set.samples.push_back(std::move(s));
  }
  return set;
}

}  // namespace kvgate::metrics
