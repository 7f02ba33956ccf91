#include "kernels/cuda/pdl.h"

#include <cstdlib>
#include <string>

#include "core/status.h"

namespace tessera::cuda::pdl {

bool enabled() {
    static const bool on = [] {
        const char* v = std::getenv("TESSERA_PDL");
        const std::string s = v ? v : "";
        TS_CHECK(s.empty() || s == "0" || s == "1", "TESSERA_PDL={}: expected 1 (the default) or 0", s);
        return s != "0";
    }();
    return on;
}

}  // namespace tessera::cuda::pdl
