#include "bench/loadgen/report.h"

#include <cstdio>
#include <optional>
#include <string_view>

#include "base/json_writer.h"

namespace sluice::loadgen {

namespace {

class Line {
 public:
  Line() { out_ += '{'; }

  void key(std::string_view name) {
    if (out_.size() > 1) {
      out_ += ',';
    }
    appendJsonString(out_, name);
    out_ += ':';
  }
  void string(std::string_view name, const std::optional<std::string>& value) {
    key(name);
    if (value) {
      appendJsonString(out_, *value);
    } else {
      out_ += "null";
    }
  }
  void integer(std::string_view name, std::optional<std::uint64_t> value) {
    key(name);
    out_ += value ? std::to_string(*value) : "null";
  }
  // Fixed-point: JSON has no NaN or infinity, and a rate over an empty window is null.
  void real(std::string_view name, std::optional<double> value, int decimals) {
    key(name);
    if (!value) {
      out_ += "null";
      return;
    }
    char text[64];
    std::snprintf(text, sizeof text, "%.*f", decimals, *value);
    out_ += text;
  }
  std::string done() {
    out_ += '}';
    return std::move(out_);
  }

 private:
  std::string out_;
};

}  // namespace

std::string resultLine(const Options& options, const Summary& s) {
  const bool timed = s.seconds > 0;
  auto rate = [&](double count) -> std::optional<double> {
    return timed ? std::optional<double>(count / s.seconds) : std::nullopt;
  };
  auto percentile_us = [&](double p) -> std::optional<std::uint64_t> {
    if (s.latency.count() == 0) {
      return std::nullopt;
    }
    return (s.latency.percentile(p) + 500) / 1000;
  };
  const double requests = static_cast<double>(s.requests);
  const Mode mode = options.mode;

  Line line;
  line.string("mode", std::string(toString(mode)));
  line.string("label", options.label);
  line.string("url", options.url);
  line.string("proxy",
              options.proxy ? std::optional<std::string>(options.proxy_text) : std::nullopt);
  line.integer("concurrency", static_cast<std::uint64_t>(options.concurrency));
  line.integer("threads", static_cast<std::uint64_t>(s.threads));
  line.real("seconds", s.seconds, 3);
  line.integer("requests", s.requests);
  line.integer("errors", s.errors);
  line.real("req_per_s", mode == Mode::Idle ? std::nullopt : rate(requests), 1);
  line.integer("p50_us", percentile_us(0.50));
  line.integer("p99_us", percentile_us(0.99));
  line.real("conn_per_s",
            mode == Mode::NewConn || mode == Mode::Idle ? rate(requests) : std::nullopt, 1);
  line.real("mb_per_s",
            mode == Mode::Bulk ? rate(static_cast<double>(s.bytes) / 1e6) : std::nullopt, 2);
  line.integer("bytes", s.bytes);
  line.integer("connections",
               mode == Mode::Idle ? std::optional<std::uint64_t>(s.held) : std::nullopt);
  line.real("cpu_seconds", s.cpu_seconds, 3);
  line.string("proto", std::string(toString(options.proto)));
  line.integer("streams", options.proto == Proto::H2 ? std::optional<std::uint64_t>(options.streams)
                                                     : std::nullopt);
  return line.done();
}

std::string holdingLine(std::uint64_t connections) {
  Line line;
  line.string("event", std::string("holding"));
  line.integer("connections", connections);
  return line.done();
}

}  // namespace sluice::loadgen
