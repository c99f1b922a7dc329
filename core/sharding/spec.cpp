#include "spec.h"

#include "../util/error.h"

namespace tp {

TensorSpec TensorSpec::replicated(size_t rank)
{
    TensorSpec s;
    s.dims.resize(rank);
    return s;
}

AxisMask TensorSpec::splitAxes() const
{
    AxisMask m = 0;
    for (const auto& d : dims)
        for (int a : d) m |= AxisMask{1} << a;
    return m;
}

std::int64_t TensorSpec::splitsOf(size_t dim, const Mesh& mesh) const
{
    std::int64_t n = 1;
    for (int a : dims.at(dim)) n *= mesh.axes.at(static_cast<size_t>(a)).size;
    return n;
}

std::int64_t TensorSpec::shardNumel(const std::vector<std::int64_t>& shape, const Mesh& mesh) const
{
    std::int64_t n = 1;
    for (size_t d = 0; d < shape.size(); ++d) n *= shape[d] / (d < dims.size() ? splitsOf(d, mesh) : 1);
    return n;
}

std::string specToString(const TensorSpec& spec, const Mesh& mesh)
{
    std::string s = "[";
    for (size_t d = 0; d < spec.dims.size(); ++d) {
        if (d) s += ",";
        if (spec.dims[d].empty()) s += "-";
        for (size_t k = 0; k < spec.dims[d].size(); ++k)
            s += (k ? "*" : "") + mesh.axes.at(static_cast<size_t>(spec.dims[d][k])).name;
    }
    s += "]";
    for (int a = 0; a < mesh.rank(); ++a)
        if (spec.partial & (AxisMask{1} << a)) s += "+" + mesh.axes[static_cast<size_t>(a)].name;
    return s;
}

TensorSpec parseSpec(const std::string& text, const std::vector<std::int64_t>& shape, const Mesh& mesh)
{
    auto fail = [&](const std::string& why) { throw InputError("spec '" + text + "': " + why); };
    const auto open = text.find('['), close = text.find(']');
    if (open != 0 || close == std::string::npos) fail("expected the form [-,y,-] optionally followed by +x");
    TensorSpec spec;
    AxisMask used = 0;
    auto axisOf = [&](const std::string& name) {
        const int a = mesh.axisIndex(name);
        if (a < 0) fail("unknown mesh axis '" + name + "' (mesh " + mesh.shapeText() + ")");
        if (used & (AxisMask{1} << a)) fail("mesh axis '" + name + "' is used twice");
        used |= AxisMask{1} << a;
        return a;
    };
    const std::string body = text.substr(1, close - 1);
    size_t start = 0;
    while (true) {
        const auto comma = body.find(',', start);
        const std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        std::vector<int> axes;
        if (item != "-" && !body.empty()) { // "[]" (a scalar) has no dims
            size_t s = 0;
            while (true) {
                const auto star = item.find('*', s);
                axes.push_back(axisOf(item.substr(s, star == std::string::npos ? std::string::npos : star - s)));
                if (star == std::string::npos) break;
                s = star + 1;
            }
        }
        spec.dims.push_back(std::move(axes));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (body.empty()) spec.dims.clear();
    if (spec.dims.size() != shape.size())
        fail("has " + std::to_string(spec.dims.size()) + " dims but the tensor has rank " + std::to_string(shape.size()));
    for (size_t d = 0; d < shape.size(); ++d)
        if (shape[d] % spec.splitsOf(d, mesh) != 0)
            fail("dim " + std::to_string(d) + " (size " + std::to_string(shape[d]) + ") does not divide into " +
                 std::to_string(spec.splitsOf(d, mesh)) + " pieces");
    std::string rest = text.substr(close + 1);
    while (!rest.empty()) {
        if (rest[0] != '+') fail("unexpected '" + rest + "' after ']'");
        const auto next = rest.find('+', 1);
        spec.partial |= AxisMask{1} << axisOf(rest.substr(1, next == std::string::npos ? std::string::npos : next - 1));
        rest = next == std::string::npos ? "" : rest.substr(next);
    }
    return spec;
}

} // namespace tp
