#pragma once
// The cost model of the cost placement policy: how long each backend takes for each node
// and how long a copy between two buffer types takes (docs/scheduler.md, "Placement
// policies").
//
// A backend's profile is a small roofline per kind of work, measured on the machine by
// calibrate() (sched/calibrate.hpp) and cached in a file keyed by backend and device:
//
//     seconds(node) = node_latency + max(flops / flop rate, bytes / byte rate)
//
// with one rate pair per op class (mul_mat, element-wise, row ops, data movement); the
// mul_mat flop rate depends on the number of columns (narrow products reach a fraction
// of a wide one's rate). Each split adds split_latency (a launch and a synchronization).
// A copy from buffer type A to buffer type B takes latency + bytes / bandwidth.
//
// Everything is overridable: set() a profile or a link by hand (a profile for a device
// that is not there yet, or numbers from a vendor sheet), load() a file, or edit the
// file itself: one tab-separated line per profile or link, `name=value` fields, read by
// load() and written by save().

#include <backplane/core/conv_geometry.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>

namespace backplane {

/// Kinds of work with their own throughput: the op's family (core/op_traits.hpp).
using op_class = op_family;

constexpr op_class class_of(op_kind op) noexcept { return traits(op).family; }

/// Work of one node: floating-point operations and bytes read and written.
struct op_work {
    double flops = 0;
    double bytes = 0;
    double columns = 1; ///< mul_mat: columns per product (src1's ne[1])
};

/// What a node costs any backend: a matrix product (mul_mat, out_prod) 2*K*M*N flops over all batches and
/// its operands' and result's bytes (mul_mat_id: the experts its columns can use, and
/// about n_used * n_tokens / n_expert columns per expert); flash_attn_ext the two products
/// of every query with every position (2 * n_kv * (D_k + D_v) flops per query and head,
/// the queries as columns) and its sources' and result's bytes, each read once; conv_2d
/// 2 * kw * kh * ic flops per result element, its output positions as columns; the
/// transposed convolutions 2 * kw * kh * oc flops per input element, the input positions
/// as columns; get_rows
/// reads only the rows it gathers; other ops their sources' and result's bytes.
inline op_work work_of(const tensor& t) noexcept {
    op_work w;
    const auto nbytes = [](const tensor* s) { return s != nullptr ? static_cast<double>(s->nbytes()) : 0.0; };
    switch (t.op) {
    case op_kind::mul_mat:
    case op_kind::out_prod: { // K = a.ne0 (mul_mat) or a.ne1 (out_prod); the columns b.ne1 or b.ne0
        const tensor* a = t.src[0];
        const tensor* b = t.src[1];
        if (a == nullptr || b == nullptr) return w;
        const bool outer = t.op == op_kind::out_prod;
        w.flops = 2.0 * static_cast<double>(a->ne[outer ? 1 : 0]) * static_cast<double>(t.nelements());
        w.bytes = nbytes(a) + nbytes(b) + static_cast<double>(t.nbytes());
        w.columns = static_cast<double>(std::max<std::int64_t>(1, b->ne[outer ? 0 : 1]));
        return w;
    }
    case op_kind::mul_mat_id: {
        // every result column is a mat-vec of one expert's matrix; at most every expert is read
        const tensor* as = t.src[0];
        const tensor* b = t.src[1];
        if (as == nullptr || b == nullptr) return w;
        w.flops = 2.0 * static_cast<double>(as->ne[0]) * static_cast<double>(t.nelements());
        const double used = std::min(static_cast<double>(as->ne[2]), static_cast<double>(t.ne[1] * t.ne[2]));
        w.bytes = nbytes(as) / static_cast<double>(std::max<std::int64_t>(1, as->ne[2])) * used + nbytes(b) +
                  nbytes(t.src[2]) + static_cast<double>(t.nbytes());
        w.columns = static_cast<double>(std::max<std::int64_t>(1, t.ne[2] * t.ne[1] / std::max<std::int64_t>(1, as->ne[2])));
        return w;
    }
    case op_kind::flash_attn_ext: {
        const tensor* q = t.src[0];
        const tensor* k = t.src[1];
        if (q == nullptr || k == nullptr) return w;
        const double per_query = 2.0 * static_cast<double>(k->ne[1]) * static_cast<double>(k->ne[0] + t.ne[0]);
        w.flops = per_query * static_cast<double>(q->nrows());
        w.bytes = static_cast<double>(t.nbytes());
        for (const tensor* s : t.src) w.bytes += nbytes(s);
        w.columns = static_cast<double>(std::max<std::int64_t>(1, q->ne[1]));
        return w;
    }
    case op_kind::conv_2d: { // a product of the kernel with every output position's window
        const tensor* a = t.src[0];
        if (a == nullptr || t.src[1] == nullptr) return w;
        w.flops = 2.0 * static_cast<double>(a->ne[0] * a->ne[1] * a->ne[2]) * static_cast<double>(t.nelements());
        w.bytes = nbytes(a) + nbytes(t.src[1]) + static_cast<double>(t.nbytes());
        w.columns = static_cast<double>(std::max<std::int64_t>(1, t.ne[0] * t.ne[1] * t.ne[3]));
        return w;
    }
    case op_kind::conv_transpose_1d:
    case op_kind::conv_transpose_2d: { // every input value times every tap of every output channel
        const tensor* a = t.src[0];
        const tensor* b = t.src[1];
        if (a == nullptr || b == nullptr) return w;
        const conv_transpose_geometry g = conv_transpose_geometry_of(t);
        w.flops = 2.0 * static_cast<double>(g.kw * g.kh * g.oc) * static_cast<double>(g.iw * g.ih * g.ic * g.n);
        w.bytes = nbytes(a) + nbytes(b) + static_cast<double>(t.nbytes());
        w.columns = static_cast<double>(std::max<std::int64_t>(1, g.iw * g.ih * g.n));
        return w;
    }
    case op_kind::get_rows:
        w.bytes = 2.0 * static_cast<double>(t.nbytes()) + nbytes(t.src[1]);
        w.flops = static_cast<double>(t.nelements());
        return w;
    default:
        break;
    }
    if (class_of(t.op) == op_class::none) return w;
    w.flops = static_cast<double>(t.nelements());
    w.bytes = static_cast<double>(t.nbytes());
    for (const tensor* s : t.src) w.bytes += nbytes(s);
    return w;
}

/// One backend's speeds (see the header comment). Rates are per second; latencies in
/// seconds. The defaults are deliberately modest figures for an unmeasured backend.
struct backend_profile {
    std::string key;                ///< backend_key(name, device description)
    double node_latency = 5e-6;     ///< per node: a kernel launch or a loop's start
    double split_latency = 30e-6;   ///< per split: submitting it and synchronizing with it
    double mul_mat_flops = 20e9;    ///< mul_mat flop/s with 256 or more columns
    double mul_mat_narrow_flops = 5e9; ///< mul_mat flop/s with 16 or fewer columns
    double mul_mat_bytes = 10e9;    ///< mul_mat bytes/s when bound by reading the weights
    double elementwise_bytes = 10e9;
    double rows_bytes = 10e9;
    double data_bytes = 10e9;
    bool measured = false; ///< calibrate() measured it (false: defaults or set by hand)

    /// Seconds this backend takes for work w of class c (latency included).
    [[nodiscard]] double seconds(op_class c, const op_work& w) const noexcept {
        switch (c) {
        case op_class::none: return 0.0;
        case op_class::mul_mat: {
            // the flop rate between the narrow (16 columns) and wide (256) figures, linear
            // in log2(columns)
            const double x = std::clamp((std::log2(std::max(1.0, w.columns)) - 4.0) / 4.0, 0.0, 1.0);
            const double rate = mul_mat_narrow_flops + x * (mul_mat_flops - mul_mat_narrow_flops);
            return node_latency + std::max(w.flops / rate, w.bytes / mul_mat_bytes);
        }
        case op_class::elementwise: return node_latency + w.bytes / elementwise_bytes;
        case op_class::rows: return node_latency + w.bytes / rows_bytes;
        case op_class::data: return node_latency + w.bytes / data_bytes;
        }
        return node_latency;
    }
    [[nodiscard]] double seconds(const tensor& node) const noexcept { return seconds(class_of(node.op), work_of(node)); }
};

/// Copies from buffer type `from` to buffer type `to` (buffer type names).
struct link_profile {
    std::string from;
    std::string to;
    double latency = 20e-6;   ///< seconds per copy
    double bandwidth = 4e9;   ///< bytes per second
    bool measured = false;

    [[nodiscard]] double seconds(double bytes) const noexcept { return latency + bytes / bandwidth; }
};

/// The key of a backend in a cost model: its name and its device's description.
inline std::string backend_key(std::string_view name, std::string_view description) {
    std::string k(name);
    k += " @ ";
    k += description;
    for (char& c : k)
        if (c == '\t' || c == '\n' || c == '\r') c = ' '; // the file's separators
    return k;
}

namespace detail {

/// One line of a cost model file: a record kind and tab-separated name=value fields.
class cost_record {
public:
    explicit cost_record(std::string_view line) {
        while (true) {
            const std::size_t tab = line.find('\t');
            fields_.push_back(line.substr(0, tab));
            if (tab == std::string_view::npos) break;
            line = line.substr(tab + 1);
        }
    }

    [[nodiscard]] std::string_view kind() const noexcept { return fields_[0]; }

    /// Reads a profile record; why it is wrong, or empty.
    std::string read_profile(backend_profile& p) {
        std::string_view key;
        if (!value_of("key", key) || key.empty()) return "a profile needs key=...";
        p.key = std::string(key);
        number("node_latency", p.node_latency, false);
        number("split_latency", p.split_latency, false);
        number("mul_mat_flops", p.mul_mat_flops);
        number("mul_mat_narrow_flops", p.mul_mat_narrow_flops);
        number("mul_mat_bytes", p.mul_mat_bytes);
        number("elementwise_bytes", p.elementwise_bytes);
        number("rows_bytes", p.rows_bytes);
        number("data_bytes", p.data_bytes);
        p.measured = flag("measured");
        return why_;
    }

    /// Reads a link record; why it is wrong, or empty.
    std::string read_link(link_profile& l) {
        std::string_view from, to;
        if (!value_of("from", from) || !value_of("to", to)) return "a link needs from=... and to=...";
        l.from = std::string(from);
        l.to = std::string(to);
        number("latency", l.latency, false);
        number("bandwidth", l.bandwidth);
        l.measured = flag("measured");
        return why_;
    }

private:
    bool value_of(std::string_view name, std::string_view& out) const {
        for (std::size_t i = 1; i < fields_.size(); ++i)
            if (fields_[i].size() > name.size() && fields_[i].substr(0, name.size()) == name &&
                fields_[i][name.size()] == '=') {
                out = fields_[i].substr(name.size() + 1);
                return true;
            }
        return false;
    }

    // Field `name` into out when present (a finite number, positive or non-negative);
    // a bad value is remembered in why_.
    void number(std::string_view name, double& out, bool positive = true) {
        std::string_view v;
        if (!value_of(name, v)) return; // keep the default
        const std::string s(v);
        char* end = nullptr;
        const double x = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x) || (positive ? x <= 0 : x < 0)) {
            if (why_.empty()) why_ = "bad value for " + std::string(name) + ": '" + s + "'";
            return;
        }
        out = x;
    }

    bool flag(std::string_view name) {
        double m = 0;
        number(name, m, false);
        return m != 0;
    }

    std::vector<std::string_view> fields_;
    std::string why_;
};

} // namespace detail

/// Profiles and links by key (see the header comment).
class cost_model {
public:
    /// Adds p, replacing a profile of the same key.
    void set(backend_profile p) {
        if (backend_profile* q = find_mut(p.key))
            *q = std::move(p);
        else
            profiles_.push_back(std::move(p));
    }
    /// Adds l, replacing a link between the same buffer types.
    void set_link(link_profile l) {
        for (link_profile& q : links_)
            if (q.from == l.from && q.to == l.to) {
                q = std::move(l);
                return;
            }
        links_.push_back(std::move(l));
    }
    [[nodiscard]] const backend_profile* find(std::string_view key) const noexcept {
        for (const backend_profile& p : profiles_)
            if (p.key == key) return &p;
        return nullptr;
    }
    [[nodiscard]] const link_profile* find_link(std::string_view from, std::string_view to) const noexcept {
        for (const link_profile& l : links_)
            if (l.from == from && l.to == to) return &l;
        return nullptr;
    }
    /// Drops a profile (so that calibrate() measures it again); false when absent.
    bool erase(std::string_view key) {
        const auto it = std::find_if(profiles_.begin(), profiles_.end(), [&](const auto& p) { return p.key == key; });
        if (it == profiles_.end()) return false;
        profiles_.erase(it);
        return true;
    }
    [[nodiscard]] const std::vector<backend_profile>& profiles() const noexcept { return profiles_; }
    [[nodiscard]] const std::vector<link_profile>& links() const noexcept { return links_; }

    /// Where calibrations are cached by default: $BACKPLANE_COST_CACHE, else
    /// $XDG_CACHE_HOME/backplane/costs.tsv, else $HOME/.cache/backplane/costs.tsv; empty
    /// when none of them is set.
    [[nodiscard]] static std::string default_path() {
        if (const char* p = std::getenv("BACKPLANE_COST_CACHE"); p != nullptr && *p != '\0') return p;
        if (const char* p = std::getenv("XDG_CACHE_HOME"); p != nullptr && *p != '\0')
            return std::string(p) + "/backplane/costs.tsv";
        if (const char* p = std::getenv("HOME"); p != nullptr && *p != '\0')
            return std::string(p) + "/.cache/backplane/costs.tsv";
        return {};
    }

    /// Writes every profile and link to `path` (creating its directory), replacing the file.
    [[nodiscard]] status save(const std::string& path) const {
        if (path.empty()) return {errc::invalid_argument, "cost_model::save: no path"};
        make_parent_dirs(path);
        const std::string tmp = path + ".tmp";
        std::FILE* f = std::fopen(tmp.c_str(), "w");
        if (f == nullptr) return {errc::failed, "cost_model::save: cannot write '" + tmp + "'"};
        std::fputs("# backplane cost model: one profile or link per line, tab-separated name=value fields\n", f);
        for (const backend_profile& p : profiles_)
            std::fprintf(f,
                         "profile\tkey=%s\tnode_latency=%.6g\tsplit_latency=%.6g\tmul_mat_flops=%.6g\t"
                         "mul_mat_narrow_flops=%.6g\tmul_mat_bytes=%.6g\telementwise_bytes=%.6g\trows_bytes=%.6g\t"
                         "data_bytes=%.6g\tmeasured=%d\n",
                         p.key.c_str(), p.node_latency, p.split_latency, p.mul_mat_flops, p.mul_mat_narrow_flops,
                         p.mul_mat_bytes, p.elementwise_bytes, p.rows_bytes, p.data_bytes, p.measured ? 1 : 0);
        for (const link_profile& l : links_)
            std::fprintf(f, "link\tfrom=%s\tto=%s\tlatency=%.6g\tbandwidth=%.6g\tmeasured=%d\n", l.from.c_str(),
                         l.to.c_str(), l.latency, l.bandwidth, l.measured ? 1 : 0);
        const bool ok = std::ferror(f) == 0;
        if (std::fclose(f) != 0 || !ok) {
            std::remove(tmp.c_str());
            return {errc::failed, "cost_model::save: writing '" + tmp + "' failed"};
        }
        if (std::rename(tmp.c_str(), path.c_str()) != 0) {
            std::remove(tmp.c_str());
            return {errc::failed, "cost_model::save: cannot replace '" + path + "'"};
        }
        return {};
    }

    /// Reads `path`, adding its profiles and links (replacing those of the same keys).
    /// errc::not_found when the file does not exist, errc::invalid_argument (naming the
    /// line) when a line is malformed; nothing is added then.
    [[nodiscard]] status load(const std::string& path) {
        std::FILE* f = std::fopen(path.c_str(), "r");
        if (f == nullptr) return {errc::not_found, "cost_model::load: cannot read '" + path + "'"};
        std::string text;
        char buf[4096];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
        std::fclose(f);
        return parse(text, path);
    }

    /// load() from a string (the file's contents); `origin` names it in errors.
    [[nodiscard]] status parse(std::string_view text, std::string_view origin = "text") {
        std::vector<backend_profile> ps;
        std::vector<link_profile> ls;
        std::size_t line_no = 0;
        while (!text.empty()) {
            const std::size_t eol = text.find('\n');
            std::string_view line = text.substr(0, eol);
            text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
            ++line_no;
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            if (line.empty() || line.front() == '#') continue;
            detail::cost_record r(line);
            std::string why;
            if (r.kind() == "profile")
                why = r.read_profile(ps.emplace_back());
            else if (r.kind() == "link")
                why = r.read_link(ls.emplace_back());
            else
                why = "unknown record '" + std::string(r.kind()) + "' (expected profile or link)";
            if (!why.empty())
                return {errc::invalid_argument,
                        "cost_model: " + std::string(origin) + ":" + std::to_string(line_no) + ": " + why};
        }
        for (auto& p : ps) set(std::move(p));
        for (auto& l : ls) set_link(std::move(l));
        return {};
    }

private:
    backend_profile* find_mut(std::string_view key) noexcept {
        for (backend_profile& p : profiles_)
            if (p.key == key) return &p;
        return nullptr;
    }
    // Creates the directories leading to path (an existing one is fine; a real failure
    // shows when the file is opened).
    static void make_parent_dirs(const std::string& path) {
        for (std::size_t i = 1; i < path.size(); ++i)
            if (path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
    }

    std::vector<backend_profile> profiles_;
    std::vector<link_profile> links_;
};

} // namespace backplane
