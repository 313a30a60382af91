// decide() on requests: methods, paths, SNI/Host binding, the order of checks, report mode.
#include "tests/unit/policy/decision_cases.h"

namespace sluice::policy {
namespace {

// Methods and paths, once a request head is known (docs/policy.md#methods, #paths).
#define API(id, m, t, verdict_, reason_)                                                     \
  {.name = id, .host = "api.allowed.test", .sni = kSame, .request = true, .method = m,       \
   .target = t, .verdict = verdict_, .reason = reason_,                                      \
   .rule = (verdict_ == kAllow ? "api" : nullptr)}
const Case kMethodsPaths[] = {
    API("ApiAllowed", "GET", "/v1/public/x", kAllow, Reason::None),
    API("ApiPrefixItself", "GET", "/v1/public/", kAllow, Reason::None),
    API("ApiWithQuery", "GET", "/v1/public/x?a=1&b=../../admin", kAllow, Reason::None),
    API("ApiUnreservedEscape", "GET", "/%761/public/x", kAllow, Reason::None),
    API("ApiTildeEscape", "GET", "/v1/public/%7Euser", kAllow, Reason::None),
    API("ApiPost", "POST", "/v1/public/x", kDeny, Reason::NotAllowedMethod),
    API("ApiLowerCaseGet", "get", "/v1/public/x", kDeny, Reason::NotAllowedMethod),
    API("ApiHead", "HEAD", "/v1/public/x", kDeny, Reason::NotAllowedMethod),
    API("ApiDelete", "DELETE", "/v1/public/x", kDeny, Reason::NotAllowedMethod),
    API("ApiNoTrailingSlash", "GET", "/v1/public", kDeny, Reason::NotAllowedPath),
    API("ApiGluedSegment", "GET", "/v1/publicx", kDeny, Reason::NotAllowedPath),
    API("ApiOtherPath", "GET", "/admin", kDeny, Reason::NotAllowedPath),
    API("ApiRoot", "GET", "/", kDeny, Reason::NotAllowedPath),
    API("ApiDotDot", "GET", "/v1/public/../admin", kDeny, Reason::NotAllowedPath),
    API("ApiDot", "GET", "/v1/public/./x", kDeny, Reason::NotAllowedPath),
    API("ApiEncodedDotDot", "GET", "/v1/public/%2e%2e/admin", kDeny, Reason::NotAllowedPath),
    API("ApiEncodedDotDotUpper", "GET", "/v1/public/%2E%2E/admin", kDeny, Reason::NotAllowedPath),
    API("ApiHalfEncodedDotDot", "GET", "/v1/public/.%2e/admin", kDeny, Reason::NotAllowedPath),
    API("ApiEncodedSlashDotDot", "GET", "/v1/public/..%2fadmin", kDeny, Reason::NotAllowedPath),
    API("ApiEncodedSlash", "GET", "/v1/public/a%2Fb", kDeny, Reason::NotAllowedPath),
    API("ApiEncodedBackslash", "GET", "/v1/public/..%5cadmin", kDeny, Reason::NotAllowedPath),
    API("ApiEncodedNul", "GET", "/v1/public/x%00.json", kDeny, Reason::NotAllowedPath),
    // Read otherwise by an origin that decodes twice ("%252e" is "%2e", then ".").
    API("ApiDoubleEncodedDotDot", "GET", "/v1/public/%252e%252e/admin", kDeny,
        Reason::NotAllowedPath),
    API("ApiDoubleEncodedDotDotMixedCase", "GET", "/v1/public/%252E%252e/admin", kDeny,
        Reason::NotAllowedPath),
    API("ApiDoubleEncodedSlash", "GET", "/v1/public/..%252fadmin", kDeny, Reason::NotAllowedPath),
    API("ApiDoubleEncodedBackslash", "GET", "/v1/public/..%255cadmin", kDeny,
        Reason::NotAllowedPath),
    API("ApiDoubleEncodedNul", "GET", "/v1/public/x%2500.json", kDeny, Reason::NotAllowedPath),
    API("ApiDoubleEncodedHexDigits", "GET", "/v1/public/%25%32%65%25%32%65/admin", kDeny,
        Reason::NotAllowedPath),
    API("ApiTripleEncodedDotDot", "GET", "/v1/public/%25252e%25252e/admin", kDeny,
        Reason::NotAllowedPath),
    API("ApiDoubleEncodedIisUnicode", "GET", "/v1/public/%25u002e%25u002e/admin", kDeny,
        Reason::NotAllowedPath),
    API("ApiEncodedPercentNotAnEscape", "GET", "/v1/public/100%25off", kAllow, Reason::None),
    API("ApiDoubleEncodedInQuery", "GET", "/v1/public/x?next=%252e%252e%252fadmin", kAllow,
        Reason::None),
    API("ApiSemicolonDotDot", "GET", "/v1/public/..;/admin", kDeny, Reason::NotAllowedPath),
    API("ApiSemicolonParamOk", "GET", "/v1/public/x;v=1", kAllow, Reason::None),
    API("ApiDoubleSlash", "GET", "/v1/public//x", kDeny, Reason::NotAllowedPath),
    API("ApiLeadingDoubleSlash", "GET", "//v1/public/x", kDeny, Reason::NotAllowedPath),
    API("ApiUpperCasePath", "GET", "/V1/PUBLIC/x", kDeny, Reason::NotAllowedPath),
    API("ApiAsterisk", "GET", "*", kDeny, Reason::NotAllowedPath),
    API("ApiNotOriginForm", "GET", "v1/public/x", kDeny, Reason::BadRequest),
    API("ApiSpaceInPath", "GET", "/v1/public/a b", kDeny, Reason::BadRequest),
    API("ApiBadEscape", "GET", "/v1/public/%zz", kDeny, Reason::BadRequest),
    API("ApiTruncatedEscape", "GET", "/v1/public/%2", kDeny, Reason::BadRequest),
    API("ApiFragment", "GET", "/v1/public/x#frag", kDeny, Reason::BadRequest),
    API("ApiRawBackslash", "GET", "/v1/public/..\\admin", kDeny, Reason::BadRequest),
    API("ApiNonAscii", "GET", "/v1/public/\xc3\xa9", kDeny, Reason::BadRequest),
    API("ApiEmptyTarget", "GET", "", kDeny, Reason::BadRequest),
#undef API
#define PYPI(id, t, verdict_, reason_)                                                     \
  {.name = id, .host = "pypi.test", .sni = kSame, .request = true, .target = t,            \
   .verdict = verdict_, .reason = reason_, .rule = (verdict_ == kAllow ? "pypi" : nullptr)}
    PYPI("PypiSimpleSlash", "/simple/", kAllow, Reason::None),
    PYPI("PypiSimplePackage", "/simple/requests/", kAllow, Reason::None),
    PYPI("PypiSimpleNoSlash", "/simple", kDeny, Reason::NotAllowedPath),
    PYPI("PypiSimpleGlued", "/simplex/", kDeny, Reason::NotAllowedPath),
    PYPI("PypiPackagesExact", "/packages", kAllow, Reason::None),
    PYPI("PypiPackagesSlash", "/packages/", kAllow, Reason::None),
    PYPI("PypiPackagesFile", "/packages/ab/cd/x-1.0.tar.gz", kAllow, Reason::None),
    PYPI("PypiPackagesGlued", "/packagesx", kDeny, Reason::NotAllowedPath),
    PYPI("PypiPackagesQuery", "/packages?x=1", kAllow, Reason::None),
    PYPI("PypiEscapeOutOfPrefix", "/simple/%2e%2e/admin", kDeny, Reason::NotAllowedPath),
    PYPI("PypiUnrestrictedDotsElsewhere", "/other/../simple/", kDeny, Reason::NotAllowedPath),
#undef PYPI
// npm's scoped packages (docs/policy.md#paths): the packument is "/@scope%2fname", the tarball
// "/@scope/name/-/name-1.0.0.tgz". The rule spells the encoded '/' out; nothing else may hold
// one, and every other ambiguity is refused, with %2f read as '/' too.
#define NPM(id, t, verdict_, reason_)                                                            \
  {                                                                                              \
    .name = id, .host = "npm.test", .sni = kSame, .request = true, .target = t,                  \
    .verdict = verdict_, .reason = reason_, .rule = (verdict_ == kAllow ? "npm-myorg" : nullptr) \
  }
    NPM("NpmPackument", "/@myorg%2fpkg", kAllow, Reason::None),
    NPM("NpmPackumentUpperEscape", "/@myorg%2Fpkg", kAllow, Reason::None),
    NPM("NpmPackumentQuery", "/@myorg%2fpkg?write=true", kAllow, Reason::None),
    NPM("NpmTarball", "/@myorg/pkg/-/pkg-1.0.0.tgz", kAllow, Reason::None),
    NPM("NpmOtherScopePackument", "/@other%2fpkg", kDeny, Reason::NotAllowedPath),
    NPM("NpmOtherScopeTarball", "/@other/pkg/-/pkg-1.0.0.tgz", kDeny, Reason::NotAllowedPath),
    NPM("NpmScopeGlued", "/@myorgx%2fpkg", kDeny, Reason::NotAllowedPath),
    NPM("NpmUnscoped", "/lodash", kDeny, Reason::NotAllowedPath),
    NPM("NpmEncodedSlashPastPrefix", "/@myorg%2fpkg%2f..%2f..%2fadmin", kDeny,
        Reason::NotAllowedPath),
    NPM("NpmEncodedSlashInTarballPath", "/@myorg/pkg%2f..%2f..%2fadmin", kDeny,
        Reason::NotAllowedPath),
    NPM("NpmDotSegmentAfterEncodedSlash", "/@myorg%2f..%2fadmin", kDeny, Reason::NotAllowedPath),
    NPM("NpmEncodedDotsAfterEncodedSlash", "/@myorg%2f%2e%2e", kDeny, Reason::NotAllowedPath),
    NPM("NpmEmptySegmentAfterEncodedSlash", "/@myorg%2f%2fadmin", kDeny, Reason::NotAllowedPath),
    NPM("NpmDotSegmentInTarballPath", "/@myorg/../admin", kDeny, Reason::NotAllowedPath),
    NPM("NpmDoubleEncodedSlash", "/@myorg%252fpkg", kDeny, Reason::NotAllowedPath),
    NPM("NpmDoubleEncodedAfterSlash", "/@myorg%2f%252e%252e", kDeny, Reason::NotAllowedPath),
    NPM("NpmEncodedBackslash", "/@myorg%5cpkg", kDeny, Reason::NotAllowedPath),
    NPM("NpmEncodedNul", "/@myorg%2fpkg%00", kDeny, Reason::NotAllowedPath),
#undef NPM
    // A rule without `paths` forwards any valid target, ambiguous or not: nothing to escape.
    {.name = "NoPathRuleAllowsDotDot",
     .host = "a.wild.test",
     .sni = kSame,
     .request = true,
     .target = "/a/../b",
     .verdict = kAllow,
     .rule = "wild"},
    {.name = "NoPathRuleAllowsEncodedSlash",
     .host = "a.wild.test",
     .sni = kSame,
     .request = true,
     .target = "/@scope%2fname",
     .verdict = kAllow,
     .rule = "wild"},
    {.name = "NoPathRuleAllowsDoubleEncoded",
     .host = "a.wild.test",
     .sni = kSame,
     .request = true,
     .target = "/a/%252e%252e/b",
     .verdict = kAllow,
     .rule = "wild"},
    {.name = "NoPathRuleStillRejectsBadTarget",
     .host = "a.wild.test",
     .sni = kSame,
     .request = true,
     .target = "/a\x01",
     .reason = Reason::BadRequest},
    {.name = "NoMethodRuleAllowsAny",
     .host = "a.wild.test",
     .sni = kSame,
     .request = true,
     .method = "PATCH",
     .verdict = kAllow,
     .rule = "wild"},
    // CONNECT stage: method and path unknown, so a method- or path-limited rule still lets
    // the tunnel open; each request inside is checked.
    {.name = "ConnectToMethodLimitedHost",
     .host = "api.allowed.test",
     .verdict = kAllow,
     .rule = "api"},
    // Several rules for one host: the first that matches wins; else the furthest reason.
    {.name = "SecondRuleMatches",
     .host = "upload.test",
     .sni = kSame,
     .request = true,
     .method = "PUT",
     .target = "/put/x",
     .verdict = kAllow,
     .rule = "upload-put"},
    {.name = "FirstRuleMatches",
     .host = "upload.test",
     .sni = kSame,
     .request = true,
     .method = "POST",
     .target = "/anything",
     .verdict = kAllow,
     .rule = "upload-post"},
    {.name = "FurthestIsPath",
     .host = "upload.test",
     .sni = kSame,
     .request = true,
     .method = "PUT",
     .target = "/elsewhere",
     .reason = Reason::NotAllowedPath},
    {.name = "FurthestIsMethod",
     .host = "upload.test",
     .sni = kSame,
     .request = true,
     .method = "GET",
     .target = "/put/x",
     .reason = Reason::NotAllowedMethod},
    // WebSocket upgrades (docs/wire.md#websocket): only a rule with `websocket: true` allows
    // one; a rule that matches all else says upgrade_not_allowed, the furthest reason.
    {.name = "WebSocketOnItsRule",
     .host = "live.test",
     .sni = kSame,
     .request = true,
     .target = "/feed/x",
     .websocket = true,
     .verdict = kAllow,
     .rule = "live-feed"},
    {.name = "PlainRequestOnTheWebSocketRule",
     .host = "live.test",
     .sni = kSame,
     .request = true,
     .target = "/feed/x",
     .verdict = kAllow,
     .rule = "live-feed"},
    {.name = "WebSocketOutsideItsPaths",
     .host = "live.test",
     .sni = kSame,
     .request = true,
     .target = "/other",
     .websocket = true,
     .reason = Reason::UpgradeNotAllowed},
    {.name = "PlainRequestOutsideTheWebSocketPaths",
     .host = "live.test",
     .sni = kSame,
     .request = true,
     .target = "/other",
     .verdict = kAllow,
     .rule = "live-rest"},
    {.name = "WebSocketOnARuleWithout",
     .host = "allowed.test",
     .sni = kSame,
     .request = true,
     .websocket = true,
     .reason = Reason::UpgradeNotAllowed},
    {.name = "WebSocketPathBeforeUpgrade",
     .host = "api.allowed.test",
     .sni = kSame,
     .request = true,
     .target = "/admin",
     .websocket = true,
     .reason = Reason::NotAllowedPath},
    {.name = "WebSocketOnUnknownHost",
     .host = "nowhere.test",
     .sni = kSame,
     .request = true,
     .websocket = true,
     .reason = Reason::NotAllowedHost},
    // CONNECT stage: no request yet, so no upgrade to judge: the tunnel opens.
    {.name = "ConnectToWebSocketHost", .host = "live.test", .verdict = kAllow, .rule = "live-feed"},
};
INSTANTIATE_TEST_SUITE_P(MethodsPaths, DecisionTest, testing::ValuesIn(kMethodsPaths),
                         caseName);

// SNI, Host and authority binding (points 2-3 of docs/wire.md#the-invariant;
// docs/threat-model.md#shared-cdns).
const Case kBinding[] = {
    {.name = "SniEqualsH", .host = "allowed.test", .sni = kSame, .verdict = kAllow,
     .rule = "allowed"},
    {.name = "SniMissing", .host = "allowed.test", .sni = kNone, .reason = Reason::SniMissing},
    {.name = "SniOtherTenant", .host = "allowed.test", .sni = "evil.test",
     .reason = Reason::SniMismatch},
    {.name = "SniOtherAllowedName", .host = "allowed.test", .sni = "a.wild.test",
     .reason = Reason::SniMismatch},
    {.name = "SniCaseAndDot", .host = "allowed.test", .sni = "ALLOWED.TEST.", .verdict = kAllow,
     .rule = "allowed"},
    {.name = "SniWithNul", .host = "allowed.test", .sni = kNulSni,
     .reason = Reason::SniMismatch},
    {.name = "SniIpLiteral", .host = "allowed.test", .sni = "127.0.0.20",
     .reason = Reason::SniMismatch},
    {.name = "SniEmptyLabel", .host = "allowed.test", .sni = "allowed..test",
     .reason = Reason::SniMismatch},
    {.name = "SniIgnoredForHttp", .host = "allowed.test", .port = 80, .scheme = Scheme::Http,
     .sni = kNone, .verdict = kAllow, .rule = "allowed"},
    {.name = "HostEqualsH", .host = "allowed.test", .sni = kSame, .request = true,
     .verdict = kAllow, .rule = "allowed"},
    {.name = "HostMissing", .host = "allowed.test", .sni = kSame, .request = true,
     .host_count = 0, .reason = Reason::HostMissing},
    {.name = "HostDuplicate", .host = "allowed.test", .sni = kSame, .request = true,
     .host_count = 2, .reason = Reason::HostDuplicate},
    {.name = "DomainFronting", .host = "allowed.test", .sni = kSame, .request = true,
     .host_header = "evil.test", .reason = Reason::HostMismatch},
    {.name = "FrontingToOtherAllowedName", .host = "allowed.test", .sni = kSame,
     .request = true, .host_header = "a.wild.test", .reason = Reason::HostMismatch},
    {.name = "SecondRequestOtherHost", .host = "allowed.test", .sni = kSame, .request = true,
     .target = "/2", .host_header = "other.test", .reason = Reason::HostMismatch},
    {.name = "HostWithConnectionPort", .host = "allowed.test", .sni = kSame, .request = true,
     .host_header = "allowed.test:443", .verdict = kAllow, .rule = "allowed"},
    {.name = "HostWithOtherPort", .host = "allowed.test", .sni = kSame, .request = true,
     .host_header = "allowed.test:8443", .reason = Reason::HostMismatch},
    {.name = "HostCaseAndDot", .host = "allowed.test", .sni = kSame, .request = true,
     .host_header = "ALLOWED.test.", .verdict = kAllow, .rule = "allowed"},
    {.name = "HostEmptyPort", .host = "allowed.test", .sni = kSame, .request = true,
     .host_header = "allowed.test:", .reason = Reason::HostMismatch},
    {.name = "HostOctalPort", .host = "allowed.test", .sni = kSame, .request = true,
     .host_header = "allowed.test:0443", .reason = Reason::HostMismatch},
    {.name = "HostUserInfo", .host = "allowed.test", .sni = kSame, .request = true,
     .host_header = "evil.test@allowed.test", .reason = Reason::HostMismatch},
    {.name = "HostIpLiteral", .host = "allowed.test", .sni = kSame, .request = true,
     .host_header = "127.0.0.20", .reason = Reason::HostMismatch},
    {.name = "HostEmpty", .host = "allowed.test", .sni = kSame, .request = true,
     .host_header = "", .reason = Reason::HostMismatch},
    {.name = "HostWithSpace", .host = "allowed.test", .sni = kSame, .request = true,
     .host_header = "allowed.test evil.test", .reason = Reason::HostMismatch},
    {.name = "ReverseFronting", .host = "evil.test", .sni = kSame, .request = true,
     .host_header = "allowed.test", .reason = Reason::HostMismatch},
    {.name = "AbsoluteFormMatches", .host = "allowed.test", .port = 80, .scheme = Scheme::Http,
     .request = true, .uri_authority = kSame, .verdict = kAllow, .rule = "allowed"},
    {.name = "AbsoluteFormWithPort", .host = "allowed.test", .port = 80,
     .scheme = Scheme::Http, .request = true, .host_header = "allowed.test:80",
     .uri_authority = "allowed.test:80", .verdict = kAllow, .rule = "allowed"},
    {.name = "AbsoluteFormOtherAuthority", .host = "allowed.test", .sni = kSame,
     .request = true, .uri_authority = "evil.test", .reason = Reason::HostMismatch},
    {.name = "AbsoluteUriVsHost", .host = "allowed.test", .port = 80, .scheme = Scheme::Http,
     .request = true, .host_header = "evil.test", .uri_authority = kSame,
     .reason = Reason::HostMismatch},
    {.name = "AbsoluteFormOtherPort", .host = "allowed.test", .port = 80,
     .scheme = Scheme::Http, .request = true, .uri_authority = "allowed.test:8080",
     .reason = Reason::HostMismatch},
};
INSTANTIATE_TEST_SUITE_P(Binding, DecisionTest, testing::ValuesIn(kBinding),
                         caseName);

// The order of the checks, and report mode (docs/policy.md#the-decision, #report-mode).
const Case kOrderAndModes[] = {
    {.name = "BadHostBeforeSni",
     .host = "allowed..test",
     .sni = "evil.test",
     .reason = Reason::BadHost},
    {.name = "SniBeforeHost",
     .host = "allowed.test",
     .sni = "evil.test",
     .request = true,
     .host_header = "other.test",
     .reason = Reason::SniMismatch},
    {.name = "HostBeforeRules",
     .host = "evil.test",
     .sni = kSame,
     .request = true,
     .host_header = "other.test",
     .reason = Reason::HostMismatch},
    {.name = "TargetBeforeHost",
     .host = "allowed.test",
     .sni = kSame,
     .request = true,
     .target = "nope",
     .host_count = 0,
     .reason = Reason::BadRequest},
    {.name = "RulesBeforeAddresses",
     .host = "evil.test",
     .addresses = {"127.0.0.1"},
     .reason = Reason::NotAllowedHost},
    {.name = "EmptyPolicyDeniesAll",
     .host = "allowed.test",
     .sandbox = "closed",
     .reason = Reason::NotAllowedHost},
    {.name = "EmptyPolicyDeniesLiteral",
     .host = "93.184.216.34",
     .sandbox = "closed",
     .reason = Reason::IpLiteral},
    {.name = "ReportAllowedStillAllow",
     .host = "allowed.test",
     .sandbox = "trial",
     .verdict = kAllow,
     .rule = "allowed"},
    {.name = "ReportUnlistedHost",
     .host = "evil.test",
     .sandbox = "trial",
     .verdict = kReport,
     .reason = Reason::NotAllowedHost},
    {.name = "ReportUnlistedHostPublic",
     .host = "evil.test",
     .sandbox = "trial",
     .addresses = {"93.184.216.34"},
     .verdict = kReport,
     .reason = Reason::NotAllowedHost},
    {.name = "ReportStillChecksAddresses",
     .host = "evil.test",
     .sandbox = "trial",
     .addresses = {"127.0.0.1"},
     .reason = Reason::IpDenied},
    {.name = "ReportStillChecksMetadata",
     .host = "a.wild.test",
     .sandbox = "trial",
     .addresses = {"169.254.169.254"},
     .reason = Reason::IpDenied,
     .rule = "wild"},
    {.name = "ReportWrongPort",
     .host = "allowed.test",
     .port = 22,
     .sandbox = "trial",
     .verdict = kReport,
     .reason = Reason::NotAllowedPort},
    {.name = "ReportWrongMethod",
     .host = "api.allowed.test",
     .sandbox = "trial",
     .sni = kSame,
     .request = true,
     .method = "POST",
     .target = "/v1/public/x",
     .verdict = kReport,
     .reason = Reason::NotAllowedMethod},
    {.name = "ReportWrongPath",
     .host = "api.allowed.test",
     .sandbox = "trial",
     .sni = kSame,
     .request = true,
     .target = "/admin",
     .verdict = kReport,
     .reason = Reason::NotAllowedPath},
    {.name = "ReportUpgradeNotAllowed",
     .host = "allowed.test",
     .sandbox = "trial",
     .sni = kSame,
     .request = true,
     .websocket = true,
     .verdict = kReport,
     .reason = Reason::UpgradeNotAllowed},
    {.name = "ReportBadHostDenied", .host = "a..b", .sandbox = "trial", .reason = Reason::BadHost},
    {.name = "ReportIpLiteralDenied",
     .host = "8.8.8.8",
     .sandbox = "trial",
     .reason = Reason::IpLiteral},
    {.name = "ReportSniMismatchDenied",
     .host = "allowed.test",
     .sandbox = "trial",
     .sni = "evil.test",
     .reason = Reason::SniMismatch},
    {.name = "ReportHostMismatchDenied",
     .host = "allowed.test",
     .sandbox = "trial",
     .sni = kSame,
     .request = true,
     .host_header = "evil.test",
     .reason = Reason::HostMismatch},
    {.name = "ReportBadRequestDenied",
     .host = "allowed.test",
     .sandbox = "trial",
     .sni = kSame,
     .request = true,
     .target = "/a b",
     .reason = Reason::BadRequest},
};
INSTANTIATE_TEST_SUITE_P(OrderAndModes, DecisionTest, testing::ValuesIn(kOrderAndModes),
                         caseName);

TEST(DecisionDefaults, DefaultConstructedDenies) {
  Decision d;
  EXPECT_EQ(d.verdict, Verdict::Deny);
  EXPECT_FALSE(d.forwards());
  EXPECT_EQ(d.rule, nullptr);
}

TEST(DecisionUsableAddresses, MarksExactlyThePassingAddresses) {
  auto config = loadConfig({"t.yaml", kPolicy}, {});
  ASSERT_TRUE(config);
  std::vector<IpAddress> addresses;
  for (const char* text : {"127.0.0.1", "93.184.216.34", "10.0.0.1", "2606:4700::1111"}) {
    addresses.push_back(*IpAddress::parse(text));
  }
  RequestFacts facts;
  facts.target_host = "a.wild.test";
  facts.port = 443;
  facts.resolved = true;
  facts.addresses = addresses;
  Decision d = decide(*config.value()->findSandbox("sbx"), facts);
  EXPECT_EQ(d.verdict, Verdict::Allow);
  EXPECT_TRUE(d.ip_checked);
  EXPECT_EQ(d.usable_addresses, 0b1010u);
}

// More rules naming one host than the index's fast path holds: the scan finds the same rule.
TEST(DecisionManyRules, FindsTheFirstMatchingRuleBeyondTheFastPath) {
  std::string yaml =
      "version: 1\nsandboxes:\n  - name: s\n    listen: 127.0.0.1:3128\n    policy: p\n"
      "policies:\n  p:\n    rules:\n";
  for (int i = 0; i < 80; ++i) {
    yaml += "      - name: r" + std::to_string(i) + "\n        hosts: [many.test]\n" +
            "        methods: [M" + std::to_string(i) + "]\n";
  }
  auto config = loadConfig({"many.yaml", yaml}, {});
  ASSERT_TRUE(config);
  RequestHead head;
  head.method = "M75";
  head.target = "/";
  head.host_count = 1;
  head.host = "many.test";
  RequestFacts facts;
  facts.target_host = "many.test";
  facts.port = 443;
  facts.request = &head;
  Decision d = decide(*config.value()->findSandbox("s"), facts);
  ASSERT_EQ(d.verdict, Verdict::Allow);
  EXPECT_EQ(d.rule->name, "r75");
}

}  // namespace
}  // namespace sluice::policy

namespace sluice::policy {
namespace {

// The sandbox's resolver answers only names a rule could allow
// (docs/policy.md#the-sandboxs-resolver).
TEST(MayResolve, OnlyNamesARuleCouldAllow) {
  auto config = loadConfig({"t.yaml", kPolicy}, {});
  ASSERT_TRUE(config);
  const Sandbox& sbx = *config.value()->findSandbox("sbx");
  const Sandbox& trial = *config.value()->findSandbox("trial");
  const Sandbox& closed = *config.value()->findSandbox("closed");
  auto may = [](const Sandbox& s, std::string_view name) {
    auto host = canonicalizeHost(name);
    return host && mayResolve(s, *host);
  };
  EXPECT_TRUE(may(sbx, "allowed.test"));
  EXPECT_TRUE(may(sbx, "ALLOWED.TEST."));
  EXPECT_TRUE(may(sbx, "api.allowed.test"));  // its method and path rules apply later
  EXPECT_TRUE(may(sbx, "x.y.wild.test"));
  EXPECT_FALSE(may(sbx, "wild.test"));
  EXPECT_FALSE(may(sbx, "c2vjcmv0.attacker.test"));
  EXPECT_FALSE(may(sbx, "93.184.216.34"));  // a literal is listed, but is no name to resolve
  EXPECT_FALSE(may(closed, "allowed.test"));
  EXPECT_TRUE(may(trial, "anything.example"));  // report mode: traffic must reach sluice
  EXPECT_FALSE(may(trial, "10.0.0.1"));
}

}  // namespace
}  // namespace sluice::policy
