// Fixture program for verify/testdata/gen.sh: what googletest's XML says about each outcome.
#include <cstdlib>
#include <gtest/gtest.h>

TEST(Math, Adds) { EXPECT_EQ(2, 1 + 1); }
TEST(Math, DISABLED_Slow) { EXPECT_EQ(1, 2); }
TEST(Math, SkipsOnPurpose) { GTEST_SKIP() << "needs a GPU"; }
#ifdef WITH_FAIL
TEST(Math, Divides) { EXPECT_EQ(4, 7 / 2) << "integer division"; }
#endif
TEST(DISABLED_Wip, Anything) { EXPECT_TRUE(false); }

#ifdef WITH_SETUP_FAIL
// A failure in SetUpTestSuite: outside any test.
class Db : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { FAIL() << "cannot connect to the database"; }
};
TEST_F(Db, Query) { EXPECT_TRUE(true); }
#endif

#ifdef WITH_SUITE_SKIP
// A deliberate skip in SetUpTestSuite: its tests are skipped, the program exits 0.
class Gpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { GTEST_SKIP() << "no GPU"; }
};
TEST_F(Gpu, Renders) { EXPECT_TRUE(true); }
#endif

#ifdef WITH_ENV_FAIL
// A failing global environment: outside every test suite.
class Env : public ::testing::Environment {
 public:
  void SetUp() override { FAIL() << "fixture server did not start"; }
};
testing::Environment* const env = testing::AddGlobalTestEnvironment(new Env);
#endif

#ifdef WITH_CRASH
TEST(Crash, Aborts) { std::abort(); }
#endif
