#pragma once
// Execution traces of a scheduler's computes (scheduler_params::trace): what each split
// did and when, as Chrome trace JSON (chrome://tracing, ui.perfetto.dev) or as a table per
// backend.
//
// Times are host times (steady_clock) from the start of the compute. To time each piece,
// a traced compute synchronizes a split's backend after its input copies and after its
// nodes, so backends do not overlap while tracing. A backend that times its work on the
// device (timed_backend: Vulkan timestamp queries) also reports when each split's nodes
// ran there; those device times are placed on the trace's clock by one offset per backend
// and compute (the device work of a split ends no later than the host saw it end), so
// their durations and gaps are the device's own.

#include <backplane/core/concepts.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <limits>
#include <optional>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

/// One timed piece of a traced compute.
struct trace_event {
    enum class kind : std::uint8_t {
        copy,    ///< the split's inputs copied into its backend's memory
        compute, ///< the split's nodes computed
    };
    kind what = kind::compute;
    std::size_t split = 0;   ///< index of the split in the plan
    std::size_t backend = 0; ///< index of the backend that ran it
    std::size_t items = 0;   ///< nodes computed, or tensors copied
    std::size_t bytes = 0;   ///< bytes copied (copy events)
    std::int64_t start_ns = 0, end_ns = 0; ///< since the start of the compute
    /// Compute events of a timed backend: when the nodes ran on the device, on the same
    /// clock as start_ns (see the header comment).
    bool has_device_time = false;
    std::int64_t device_start_ns = 0, device_end_ns = 0;
};

/// What an executor reports of a run (sched/executor.hpp). With an observer the executor
/// synchronizes each split's backend after its input copies and after its nodes, so each
/// piece is timed alone: mark() comes before each piece, copied() or computed() after it.
class run_observer {
public:
    virtual ~run_observer() = default;
    virtual void started() = 0;
    virtual void mark() = 0;
    virtual void copied(std::size_t split, std::size_t backend, std::size_t tensors, std::size_t bytes) = 0;
    /// `device`: when the backend ran the split's nodes on its device (timed_backend).
    virtual void computed(std::size_t split, std::size_t backend, std::size_t nodes,
                          std::optional<device_span> device) = 0;
    virtual void finished() = 0;
};

/// The run_observer that records a trace (trace_event per piece, host times since
/// started(), device times moved onto that clock: see the header comment).
class tracer final : public run_observer {
public:
    [[nodiscard]] std::span<const trace_event> events() const noexcept { return events_; }
    void clear() noexcept { events_.clear(); }

    void started() override {
        events_.clear();
        start_ = std::chrono::steady_clock::now();
    }
    void mark() override { mark_ = now(); }
    void copied(std::size_t split, std::size_t backend, std::size_t tensors, std::size_t bytes) override {
        events_.push_back({trace_event::kind::copy, split, backend, tensors, bytes, mark_, now()});
    }
    void computed(std::size_t split, std::size_t backend, std::size_t nodes,
                  std::optional<device_span> device) override {
        trace_event e{trace_event::kind::compute, split, backend, nodes, 0, mark_, now()};
        if (device) {
            e.has_device_time = true;
            e.device_start_ns = static_cast<std::int64_t>(device->start_ns);
            e.device_end_ns = static_cast<std::int64_t>(device->end_ns);
        }
        events_.push_back(e);
    }
    // Moves each backend's device times (its own clock) onto the trace's: one offset per
    // backend, the largest that ends no device span after the host saw it end.
    void finished() override {
        std::vector<std::int64_t> offset;
        for (const trace_event& e : events_) {
            if (!e.has_device_time) continue;
            if (offset.size() <= e.backend) offset.resize(e.backend + 1, std::numeric_limits<std::int64_t>::max());
            offset[e.backend] = std::min(offset[e.backend], e.end_ns - e.device_end_ns);
        }
        for (trace_event& e : events_)
            if (e.has_device_time) {
                e.device_start_ns += offset[e.backend];
                e.device_end_ns += offset[e.backend];
            }
    }

private:
    [[nodiscard]] std::int64_t now() const {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
    }

    std::vector<trace_event> events_;
    std::chrono::steady_clock::time_point start_{};
    std::int64_t mark_ = 0;
};

namespace detail {

inline void json_escape(std::string& out, std::string_view s) {
    for (const char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
                out += buf;
            } else {
                out += c;
            }
        }
    }
}

inline std::string microseconds(std::int64_t ns) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1000.0);
    return buf;
}

} // namespace detail

/// The events as Chrome trace JSON: one track (thread) per backend, named after it.
inline std::string trace_to_chrome_json(std::span<const trace_event> events, std::span<const std::string> backend_names) {
    std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
    bool first = true;
    const auto sep = [&] {
        if (!first) out += ',';
        first = false;
    };
    const std::size_t nb = backend_names.size();
    std::vector<bool> timed(nb, false);
    for (const trace_event& e : events)
        if (e.has_device_time && e.backend < nb) timed[e.backend] = true;
    for (std::size_t b = 0; b < nb; ++b) {
        sep();
        out += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + std::to_string(b) + ",\"args\":{\"name\":\"";
        detail::json_escape(out, backend_names[b]);
        out += "\"}}";
        if (!timed[b]) continue;
        sep(); // the device's own track, below the host's
        out += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + std::to_string(nb + b) +
               ",\"args\":{\"name\":\"";
        detail::json_escape(out, backend_names[b]);
        out += " (device)\"}}";
    }
    for (const trace_event& e : events) {
        sep();
        const bool copy = e.what == trace_event::kind::copy;
        out += "{\"name\":\"";
        out += copy ? "copy inputs of split " : "split ";
        out += std::to_string(e.split) + "\",\"cat\":\"" + (copy ? "copy" : "compute") + "\",\"ph\":\"X\",\"pid\":0,\"tid\":" +
               std::to_string(e.backend) + ",\"ts\":" + detail::microseconds(e.start_ns) +
               ",\"dur\":" + detail::microseconds(e.end_ns - e.start_ns) + ",\"args\":{\"" +
               (copy ? "tensors" : "nodes") + "\":" + std::to_string(e.items);
        if (copy) out += ",\"bytes\":" + std::to_string(e.bytes);
        out += "}}";
        if (!e.has_device_time) continue;
        sep();
        out += "{\"name\":\"split " + std::to_string(e.split) + " on the device\",\"cat\":\"device\",\"ph\":\"X\",\"pid\":0,\"tid\":" +
               std::to_string(nb + e.backend) + ",\"ts\":" + detail::microseconds(e.device_start_ns) +
               ",\"dur\":" + detail::microseconds(e.device_end_ns - e.device_start_ns) + ",\"args\":{\"nodes\":" +
               std::to_string(e.items) + "}}";
    }
    out += "]}\n";
    return out;
}

/// Per backend: splits computed, compute time, input copies, bytes and copy time.
inline std::string trace_summary(std::span<const trace_event> events, std::span<const std::string> backend_names) {
    struct row {
        std::size_t computes = 0, nodes = 0, copies = 0, tensors = 0, bytes = 0;
        std::int64_t compute_ns = 0, copy_ns = 0, device_ns = 0;
        bool timed = false;
    };
    std::vector<row> rows(backend_names.size());
    std::int64_t end = 0;
    for (const trace_event& e : events) {
        if (e.backend >= rows.size()) rows.resize(e.backend + 1);
        row& r = rows[e.backend];
        if (e.what == trace_event::kind::copy) {
            ++r.copies;
            r.tensors += e.items;
            r.bytes += e.bytes;
            r.copy_ns += e.end_ns - e.start_ns;
        } else {
            ++r.computes;
            r.nodes += e.items;
            r.compute_ns += e.end_ns - e.start_ns;
            if (e.has_device_time) {
                r.timed = true;
                r.device_ns += e.device_end_ns - e.device_start_ns;
            }
        }
        end = std::max(end, e.end_ns);
    }
    std::string out = "backend          splits    nodes  compute ms  device ms  copies  tensors       bytes  copy ms\n";
    char line[192];
    for (std::size_t b = 0; b < rows.size(); ++b) {
        const row& r = rows[b];
        const std::string name = b < backend_names.size() ? backend_names[b] : "#" + std::to_string(b);
        char device[32] = "         -";
        if (r.timed) std::snprintf(device, sizeof device, "%10.3f", static_cast<double>(r.device_ns) * 1e-6);
        std::snprintf(line, sizeof line, "%-14.14s %8zu %8zu %11.3f %s %7zu %8zu %11zu %8.3f\n", name.c_str(),
                      r.computes, r.nodes, static_cast<double>(r.compute_ns) * 1e-6, device, r.copies, r.tensors,
                      r.bytes, static_cast<double>(r.copy_ns) * 1e-6);
        out += line;
    }
    std::snprintf(line, sizeof line, "total: %.3f ms\n", static_cast<double>(end) * 1e-6);
    out += line;
    return out;
}

} // namespace backplane
