// The environment switches' shared parse (kernels/cuda/cuda_switches.h): env_choice gives the
// index of the variable's value among the names, 0 (the default) when unset or empty, and throws
// an Error naming every allowed value otherwise; env_switch is its two-name form. No GPU needed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/status.h"
#include "kernels/cuda/cuda_switches.h"

using namespace tessera;
using namespace tessera::cuda::detail;

TEST(CudaSwitches, EnvChoiceNamesAndDefault) {
    const char* var = "TESSERA_TEST_SWITCH";
    unsetenv(var);
    EXPECT_EQ(env_choice(var, {"a", "b", "c"}), 0);
    setenv(var, "", 1);
    EXPECT_EQ(env_choice(var, {"a", "b", "c"}), 0);
    setenv(var, "a", 1);
    EXPECT_EQ(env_choice(var, {"a", "b", "c"}), 0);
    setenv(var, "c", 1);
    EXPECT_EQ(env_choice(var, {"a", "b", "c"}), 2);
    EXPECT_TRUE(env_switch(var, "a", "c"));
    setenv(var, "a", 1);
    EXPECT_FALSE(env_switch(var, "a", "c"));
    for (const char* bad : {"d", "A", "a ", "b,c"}) {
        setenv(var, bad, 1);
        try {
            (void)env_choice(var, {"a", "b", "c"});
            ADD_FAILURE() << "accepted " << bad;
        } catch (const Error& e) {
            EXPECT_EQ(std::string(e.what()), std::string(var) + "=" + bad + ": expected a (the default), b or c");
        }
        try {
            (void)env_switch(var, "a", "c");
            ADD_FAILURE() << "accepted " << bad;
        } catch (const Error& e) {
            EXPECT_EQ(std::string(e.what()), std::string(var) + "=" + bad + ": expected a (the default) or c");
        }
    }
    unsetenv(var);
}
