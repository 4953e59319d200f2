%% A Common Test suite for the verifier's fixtures: a group, a skip; WITH_SUITE_FAIL makes
%% init_per_suite fail, WITH_GROUP_FAIL init_per_group, WITH_FAIL a test case.
-module(sample_SUITE).
-export([all/0, groups/0, init_per_suite/1, end_per_suite/1, init_per_group/2, end_per_group/2]).
-export([adds/1, divides/1, rounds/1, parses/1]).

all() -> [adds, {group, math}].
groups() -> [{math, [], [divides, rounds, parses]}].

init_per_suite(Config) ->
    case os:getenv("WITH_SUITE_FAIL") of
        false -> Config;
        _ -> error(no_database)
    end.
end_per_suite(_Config) -> ok.

init_per_group(math, Config) ->
    case os:getenv("WITH_GROUP_FAIL") of
        false -> Config;
        _ -> error(no_gpu)
    end.
end_per_group(_Group, _Config) -> ok.

adds(_Config) -> 2 = 1 + 1.
divides(_Config) ->
    Want = case os:getenv("WITH_FAIL") of false -> 2.0; _ -> 3.0 end,
    Want = 6 / 3.
rounds(_Config) -> {skip, "not implemented yet"}.
parses(_Config) -> 255 = list_to_integer("ff", 16).
