// The communicator of CPU ranks: `size` threads of this process, exchanging through shared
// memory. A collective posts each rank's buffer, waits for all (a barrier), lets every rank
// compute its own copy of the result reading the others' buffers, and waits again before any
// buffer is written or reused, so no rank reads what another is overwriting.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/comm/communicator.h"

namespace llmrt {

// Makes the `size` communicators of one group (index = rank); hand each to its rank's thread.
// size in [1, 1024].
Result<std::vector<std::unique_ptr<Communicator>>> makeInProcessGroup(int size);

}  // namespace llmrt
