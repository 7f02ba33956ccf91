#include "runtime/tensor_source.h"

#include "core/status.h"

namespace tessera {

Tensor TensorSource::get(const std::string& name, std::initializer_list<int64_t> shape) const {
    Tensor t = get(name);
    check_shape(t, shape, describe() + ": tensor " + name);
    return t;
}

}  // namespace tessera
