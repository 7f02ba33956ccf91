// Command-line options of the kernel pack's benchmarks (bench/fast_*.cpp): each binds its options
// to its own fields, then parse() reads argv — `--help` prints the usage, an unknown option or a
// missing value is Error(Invalid) (the benchmark's main prefixes its name).
//   bench::KernelArgs args(usage);
//   args.ints("--tokens", a.tokens).count("--runs", a.runs, 1).flag("--all", a.all);
//   if (!args.parse(argc, argv)) return 0;
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::bench {

class KernelArgs {
public:
    explicit KernelArgs(std::string usage) : usage_(std::move(usage)) {}

    // An integer of at least `min`.
    KernelArgs& count(const char* opt, int& v, int min) {
        return take(opt, [&v, min](const std::string& s) { v = std::max(min, std::atoi(s.c_str())); });
    }
    KernelArgs& text(const char* opt, std::string& v) {
        return take(opt, [&v](const std::string& s) { v = s; });
    }
    // A comma list of integers / of words (replacing the defaults).
    KernelArgs& ints(const char* opt, std::vector<int64_t>& v) {
        return take(opt, [&v](const std::string& s) {
            v.clear();
            for (const std::string& t : split(s)) v.push_back(std::atoll(t.c_str()));
        });
    }
    KernelArgs& words(const char* opt, std::vector<std::string>& v) {
        return take(opt, [&v](const std::string& s) { v = split(s); });
    }
    // `opt WORD`: v = (WORD == yes).
    KernelArgs& choice(const char* opt, bool& v, const char* yes) {
        return take(opt, [&v, yes](const std::string& s) { v = s == yes; });
    }
    // An option without a value: present → true.
    KernelArgs& flag(const char* opt, bool& v) {
        flags_[opt] = &v;
        return *this;
    }

    // false after printing the usage for -h / --help.
    bool parse(int argc, char** argv) const {
        for (int i = 1; i < argc; ++i) {
            const std::string o = argv[i];
            if (o == "-h" || o == "--help") {
                std::printf("%s", usage_.c_str());
                return false;
            }
            if (auto f = flags_.find(o); f != flags_.end()) {
                *f->second = true;
                continue;
            }
            auto t = takes_.find(o);
            if (t == takes_.end()) fail(ErrorKind::Invalid, "unknown option {} (see --help)", o);
            TS_CHECK(i + 1 < argc, "{} needs a value", o);
            t->second(argv[++i]);
        }
        return true;
    }

private:
    KernelArgs& take(const char* opt, std::function<void(const std::string&)> f) {
        takes_[opt] = std::move(f);
        return *this;
    }
    static std::vector<std::string> split(const std::string& s) {
        std::vector<std::string> out;
        std::stringstream ss(s);
        for (std::string item; std::getline(ss, item, ',');)
            if (!item.empty()) out.push_back(item);
        return out;
    }

    std::string usage_;
    std::map<std::string, std::function<void(const std::string&)>> takes_;
    std::map<std::string, bool*> flags_;
};

}  // namespace tessera::bench
