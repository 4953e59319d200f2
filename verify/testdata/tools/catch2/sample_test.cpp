// Fixture program for verify/testdata/gen.sh: what Catch2's JUnit reporter says about each outcome.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#include <stdexcept>

TEST_CASE("adds") {
  REQUIRE(1 + 1 == 2);
  CHECK(2 + 2 == 4);
  CHECK(3 + 3 == 6);
}

TEST_CASE("sections") {
  SECTION("first") { CHECK(true); }
  SECTION("second") { CHECK(1 == 1); }
}

// Hidden: not run unless asked for by name or tag (Catch2 2.x has no runtime skip).
TEST_CASE("slow", "[.]") { CHECK(false); }

#ifdef WITH_FAIL
TEST_CASE("divides") {
  CHECK(7 / 2 == 4);
  CHECK(6 / 2 == 3);
}
#endif

#ifdef WITH_THROW
// An exception outside any assertion.
TEST_CASE("connects") { throw std::runtime_error("cannot connect to the database"); }
#endif

#ifdef WITH_LISTENER_THROW
// An error outside any test: a listener that fails when the run starts (a fixture service that
// does not come up).
struct FixtureServer : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunStarting(Catch::TestRunInfo const&) override {
    throw std::runtime_error("fixture server did not start");
  }
};
CATCH_REGISTER_LISTENER(FixtureServer)
#endif

#ifdef WITH_STATIC_THROW
// An error before main: a global whose constructor throws (std::terminate, no report at all).
struct Config {
  Config() { throw std::runtime_error("cannot read the test configuration"); }
};
static Config config;
#endif

#ifdef WITH_MAYFAIL
// Allowed to fail: Catch2 2.x's tags for a known-flaky test and a known bug.
TEST_CASE("flaky network", "[!mayfail]") { CHECK(1 == 2); }
TEST_CASE("known bug", "[!shouldfail]") { CHECK(2 == 3); }
#endif

#ifdef WITH_SHOULDFAIL_PASSES
// A known bug that got fixed: a [!shouldfail] test that passes fails the run.
TEST_CASE("fixed bug", "[!shouldfail]") { CHECK(3 == 3); }
#endif
