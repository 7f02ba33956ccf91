// Whether the kernel pack launches with programmatic dependent launch (pdl.cuh): TESSERA_PDL
// unset or 1 (the default), 0 off. Read once; throws Error on another value.
#pragma once

namespace tessera::cuda::pdl {

bool enabled();

}  // namespace tessera::cuda::pdl
