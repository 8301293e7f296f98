#pragma once
// What placement asks the backends of one graph, each question asked once and kept:
// supports_op per (node, backend) and supports_buffer_type per (buffer type met in the
// graph, backend). The placement passes, the cost policy and the memory caps ask here.
// A node's rule (is_defined, core/op_traits.hpp) is judged once, by the numbering, not
// once per backend: the backends are asked only what they narrow (supports_defined_op).

#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/sched/backend_set.hpp>
#include <backplane/sched/plan.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace backplane::detail {

template <backend_set Set>
class backend_queries {
public:
    /// `compute_types`: each backend's compute buffer type (what a tensor it computes
    /// lives in); both must outlive this.
    backend_queries(const Set& set, const std::vector<buffer_type_ref>& compute_types)
        : set_(set), compute_types_(compute_types), nb_(set.size()) {}

    /// Forgets the last graph's answers: `num` is being numbered (its n_nodes set).
    void start(graph_numbering& num) {
        num_ = &num;
        num.types.clear();
        reads_.clear();
        sup_.assign(num.n_nodes() * nb_, -1);
    }

    [[nodiscard]] const Set& set() const noexcept { return set_; }
    [[nodiscard]] std::size_t size() const noexcept { return nb_; }
    [[nodiscard]] const buffer_type_ref& compute_type(std::size_t b) const { return compute_types_[b]; }

    /// Backend b computes node `node` (supports_op).
    [[gnu::always_inline]] bool supports(std::size_t node, std::size_t b) {
        std::int16_t& c = sup_[node * nb_ + b];
        if (c < 0) c = ask_supports(node, b) ? 1 : 0;
        return c != 0;
    }

    /// Backend b uses memory of buffer type k of the numbering (supports_buffer_type).
    [[gnu::always_inline]] bool reads_at(std::size_t b, std::size_t k) {
        std::int8_t& c = reads_[k * nb_ + b];
        if (c < 0) c = set_.supports_buffer_type(b, num_->types[k]) ? 1 : 0;
        return c != 0;
    }

    /// The index of bt in the numbering's buffer types, added on first sight.
    std::uint32_t type_index(const buffer_type_ref& bt) {
        std::vector<buffer_type_ref>& types = num_->types;
        std::size_t k = 0;
        while (k < types.size() && !(types[k] == bt)) ++k;
        if (k == types.size()) {
            types.push_back(bt);
            reads_.resize(reads_.size() + nb_, -1);
        }
        return static_cast<std::uint32_t>(k);
    }

    /// Backend b reads tensor s in place (ggml's buffer_supported): its own memory's
    /// type, else the compute buffer of the backend it (or its view source) runs on.
    bool readable(const assignment& asg, std::int32_t s, std::size_t b) {
        const auto su = static_cast<std::size_t>(s);
        if (const std::uint32_t m = num_->info[su].mem; m != 0) return reads_at(b, m - 1);
        std::int32_t owner = asg.backend[su];
        if (owner < 0 && num_->view_src(su) >= 0) owner = asg.backend[static_cast<std::size_t>(num_->view_src(su))];
        if (owner < 0) return false;
        return reads_at(b, type_index(compute_types_[static_cast<std::size_t>(owner)]));
    }

private:
    // The numbering judged the rule of each node that computes (tensor_info::defined).
    bool ask_supports(std::size_t node, std::size_t b) const {
        const tensor& t = (*num_)[node];
        if (!num_->has(node, tensor_info::computes)) return set_.supports_op(b, t);
        return num_->has(node, tensor_info::defined) && set_.supports_defined_op(b, t);
    }

    const Set& set_;
    const std::vector<buffer_type_ref>& compute_types_;
    std::size_t nb_;
    graph_numbering* num_ = nullptr;
    std::vector<std::int16_t> sup_;  // [node * nb + b]: -1 not asked yet
    std::vector<std::int8_t> reads_; // [type * nb + b]: -1 not asked yet
};

} // namespace backplane::detail
