// The memory log: named byte counters (weights, kv_pool, state_pool, activations, ...) that
// components report into, printed as one snapshot line on request (--memlog / TESSERA_MEMLOG=1)
// and exported by /metrics later.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace tessera {

class MemLog {
public:
    static MemLog& global();

    void set(const std::string& key, int64_t bytes);        // current value
    void add(const std::string& key, int64_t bytes);
    void peak(const std::string& key, int64_t bytes);       // keeps the max seen
    int64_t get(const std::string& key) const;
    std::map<std::string, int64_t> values() const;

    bool enabled() const { return enabled_; }
    void set_enabled(bool on) { enabled_ = on; }
    // Prints "[memlog <event>] weights=1.20 GiB kv_pool=... host_rss=..." if enabled.
    void snapshot(const std::string& event) const;
    std::string format(const std::string& event) const;

private:
    MemLog();
    mutable std::mutex mu_;
    std::map<std::string, int64_t> values_;
    bool enabled_ = false;
};

std::string format_bytes(int64_t bytes);  // "1.50 GiB", "12.0 MiB", "512 B"
int64_t host_rss_bytes();                 // resident set size of this process (0 if unknown)

}  // namespace tessera
