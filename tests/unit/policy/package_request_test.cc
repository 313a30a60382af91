// Which package a registry request names (docs/packages.md#requests), table by table: npm at
// the root and under a path, PyPI's index, JSON API and files, and the shapes refused.

#include "policy/package_request.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::policy {
namespace {

using Kind = PackageRequestKind;

struct Row {
  std::string_view path;  // the registry's path
  std::string_view method;
  std::string_view target;
  Kind kind;
  std::string_view name = "";
  std::string_view version = "";
  MetadataForm form = MetadataForm::None;
};

void check(Ecosystem ecosystem, const Row& row) {
  SCOPED_TRACE(std::string(row.method) + " " + std::string(row.target) + " under " +
               std::string(row.path));
  RegistrySettings registry;
  registry.ecosystem = ecosystem;
  registry.path = std::string(row.path);
  const PackageRequest got = recognizePackageRequest(registry, row.method, row.target);
  EXPECT_EQ(toString(got.kind), toString(row.kind));
  EXPECT_EQ(got.ecosystem, ecosystem);
  EXPECT_EQ(got.name, row.name);
  EXPECT_EQ(got.version, row.version);
  EXPECT_EQ(static_cast<int>(got.form), static_cast<int>(row.form));
}

const Row kNpm[] = {
    {"/", "GET", "/lodash", Kind::Metadata, "lodash", "", MetadataForm::NpmPackument},
    {"/", "HEAD", "/lodash", Kind::Metadata, "lodash", "", MetadataForm::NpmPackument},
    {"/", "GET", "/lodash?write=true", Kind::Metadata, "lodash", "", MetadataForm::NpmPackument},
    {"/", "GET", "/lodash/", Kind::Metadata, "lodash", "", MetadataForm::NpmPackument},
    {"/", "GET", "/JSONStream", Kind::Metadata, "jsonstream", "", MetadataForm::NpmPackument},
    {"/", "GET", "/@myorg%2futil", Kind::Metadata, "@myorg/util", "", MetadataForm::NpmPackument},
    {"/", "GET", "/@myorg%2Futil", Kind::Metadata, "@myorg/util", "", MetadataForm::NpmPackument},
    {"/", "GET", "/%40myorg%2futil", Kind::Metadata, "@myorg/util", "", MetadataForm::NpmPackument},
    {"/", "GET", "/@myorg/util", Kind::Metadata, "@myorg/util", "", MetadataForm::NpmPackument},
    // What the registry decodes, sluice decodes: "%6c" is 'l'.
    {"/", "GET", "/%6codash", Kind::Metadata, "lodash", "", MetadataForm::NpmPackument},
    {"/", "GET", "/lodash/4.17.21", Kind::VersionMetadata, "lodash", "4.17.21",
     MetadataForm::NpmVersion},
    {"/", "GET", "/lodash/latest", Kind::VersionMetadata, "lodash", "latest",
     MetadataForm::NpmVersion},
    {"/", "GET", "/@myorg%2futil/1.0.0", Kind::VersionMetadata, "@myorg/util", "1.0.0",
     MetadataForm::NpmVersion},
    {"/", "GET", "/lodash/-/lodash-4.17.21.tgz", Kind::File, "lodash", "4.17.21"},
    {"/", "GET", "/left-pad/-/left-pad-1.3.0-beta.1.tgz", Kind::File, "left-pad", "1.3.0-beta.1"},
    {"/", "GET", "/@myorg/util/-/util-2.0.0.tgz", Kind::File, "@myorg/util", "2.0.0"},
    {"/", "GET", "/@myorg%2futil/-/util-2.0.0.tgz", Kind::File, "@myorg/util", "2.0.0"},
    {"/", "GET", "/JSONStream/-/JSONStream-1.3.5.tgz", Kind::File, "jsonstream", "1.3.5"},
    {"/", "GET", "/lodash/-/lodash-4.17.21.tgz?x=1", Kind::File, "lodash", "4.17.21"},
    // The registry's own endpoints and its root name no package.
    {"/", "GET", "/", Kind::None},
    {"/", "GET", "/-/ping", Kind::None},
    {"/", "GET", "/-/v1/search?text=x", Kind::None},
    {"/", "GET", "/-/package/lodash/dist-tags", Kind::None},
    {"/", "POST", "/-/npm/v1/security/advisories/bulk", Kind::None},
    {"/", "PUT", "/lodash", Kind::None},
    {"/", "OPTIONS", "*", Kind::None},
    // Under a path: only below it.
    {"/npm/", "GET", "/npm/lodash", Kind::Metadata, "lodash", "", MetadataForm::NpmPackument},
    {"/npm/", "GET", "/npm/@myorg%2futil", Kind::Metadata, "@myorg/util", "",
     MetadataForm::NpmPackument},
    {"/npm/", "GET", "/npm/lodash/-/lodash-1.0.0.tgz", Kind::File, "lodash", "1.0.0"},
    {"/npm/", "GET", "/%6epm/lodash", Kind::Metadata, "lodash", "", MetadataForm::NpmPackument},
    {"/npm/", "GET", "/npm/", Kind::None},
    {"/npm/", "GET", "/npm", Kind::None},
    {"/npm/", "GET", "/other/lodash", Kind::None},
    {"/npm/", "GET", "/npmx/lodash", Kind::None},
    {"/a/b/", "GET", "/a/b/x", Kind::Metadata, "x", "", MetadataForm::NpmPackument},
    {"/a/b/", "GET", "/a/x", Kind::None},
    // A registry path written without its last '/' (the loader adds none: it refuses one).
    {"/npm", "GET", "/npm/lodash", Kind::Metadata, "lodash", "", MetadataForm::NpmPackument},
    // Refused: shapes the registry may read as a package sluice could not judge.
    {"/", "GET", "/lodash/-/other-1.0.0.tgz", Kind::Unrecognized},
    {"/", "GET", "/lodash/-/lodash-.tgz", Kind::Unrecognized},
    {"/", "GET", "/lodash/-/lodash-1.0.0.zip", Kind::Unrecognized},
    {"/", "GET", "/lodash/a/b", Kind::Unrecognized},
    {"/", "GET", "/lodash/1.0.0/x", Kind::Unrecognized},
    {"/", "GET", "/_private", Kind::Unrecognized},
    {"/", "GET", "/lo%20dash", Kind::Unrecognized},
    {"/", "GET", "/a%2fb", Kind::Unrecognized},
    {"/", "GET", "/@myorg", Kind::Unrecognized},
    {"/", "GET", "/@myorg%2futil%2fx", Kind::Unrecognized},
    {"/", "GET", "/@myorg/util%2f-", Kind::Unrecognized},
    {"/", "GET", "/lodash/..", Kind::Unrecognized},
    {"/", "GET", "/x/../lodash", Kind::Unrecognized},
    {"/", "GET", "//lodash", Kind::Unrecognized},
    {"/", "GET", "/lodash%252f", Kind::Unrecognized},
    {"/", "GET", "/lodash%5c-%5clodash-1.0.0.tgz", Kind::Unrecognized},
    {"/", "GET", "/lodash/%00", Kind::Unrecognized},
    {"/", "GET", "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r", Kind::Unrecognized},
    {"/npm/", "GET", "/npm/../secret", Kind::Unrecognized},
    {"/npm/", "GET", "/other/../npm/evil", Kind::Unrecognized},
};

TEST(PackageRequest, Npm) {
  for (const Row& row : kNpm) {
    check(Ecosystem::Npm, row);
  }
}

const Row kPypi[] = {
    {"/", "GET", "/simple/requests/", Kind::Metadata, "requests", "", MetadataForm::PypiSimple},
    {"/", "GET", "/simple/requests", Kind::Metadata, "requests", "", MetadataForm::PypiSimple},
    {"/", "GET", "/simple/Zope.Interface/", Kind::Metadata, "zope-interface", "",
     MetadataForm::PypiSimple},
    {"/", "GET", "/simple/requests/?format=json", Kind::Metadata, "requests", "",
     MetadataForm::PypiSimple},
    {"/", "GET", "/pypi/requests/json", Kind::Metadata, "requests", "", MetadataForm::PypiJson},
    {"/", "GET", "/pypi/requests/2.31.0/json", Kind::VersionMetadata, "requests", "2.31.0",
     MetadataForm::PypiJson},
    {"/", "GET", "/packages/70/8e/0e2d847013cb/requests-2.31.0-py3-none-any.whl", Kind::File,
     "requests", "2.31.0"},
    {"/", "GET", "/packages/70/8e/0e2d847013cb/requests-2.31.0-py3-none-any.whl.metadata",
     Kind::File, "requests", "2.31.0"},
    {"/", "GET", "/packages/aa/bb/cc/requests-2.31.0.tar.gz", Kind::File, "requests", "2.31.0"},
    {"/", "GET", "/packages/aa/bb/cc/python-dateutil-2.8.2.tar.gz", Kind::File, "python-dateutil",
     "2.8.2"},
    {"/", "GET", "/packages/aa/bb/cc/zope.interface-6.0.zip", Kind::File, "zope-interface", "6.0"},
    {"/", "GET", "/packages/aa/bb/cc/Foo_Bar-1.0-1-py3-none-any.whl", Kind::File, "foo-bar", "1.0"},
    {"/", "GET", "/packages/aa/bb/cc/foo-1.0-py3.9.egg", Kind::File, "foo", "1.0"},
    {"/", "GET", "/packages/aa/bb/cc/foo-1!2.0rc1.tar.bz2", Kind::File, "foo", "1!2.0rc1"},
    // A file is read by its name wherever it is: a files host has no registry path.
    {"/pypi/", "GET", "/elsewhere/foo-1.0.tar.gz", Kind::File, "foo", "1.0"},
    {"/pypi/", "GET", "/pypi/simple/foo/", Kind::Metadata, "foo", "", MetadataForm::PypiSimple},
    {"/pypi/", "GET", "/pypi/packages/x/foo-1.0-py3-none-any.whl", Kind::File, "foo", "1.0"},
    {"/", "GET", "/simple/", Kind::None},
    {"/", "GET", "/simple", Kind::None},
    {"/", "GET", "/", Kind::None},
    {"/", "POST", "/simple/requests/", Kind::None},
    {"/pypi/", "GET", "/other/page", Kind::None},
    // Refused.
    {"/", "GET", "/project/requests/", Kind::Unrecognized},
    {"/", "GET", "/simple/requests/x/", Kind::Unrecognized},
    {"/", "GET", "/simple/-bad/", Kind::Unrecognized},
    {"/", "GET", "/pypi/requests/2.0/x/json", Kind::Unrecognized},
    {"/", "GET", "/packages/aa/bb/cc/nodash.tar.gz", Kind::Unrecognized},
    {"/", "GET", "/packages/aa/bb/cc/-1.0.tar.gz", Kind::Unrecognized},
    {"/", "GET", "/packages/aa/bb/cc/foo-1.0-py3-none-any.whl.asc", Kind::Unrecognized},
    {"/", "GET", "/simple/a%2fb/", Kind::Unrecognized},
    {"/", "GET", "/simple/requests/../evil/", Kind::Unrecognized},
    {"/pypi/", "GET", "/x/../foo-1.0.tar.gz", Kind::Unrecognized},
};

TEST(PackageRequest, Pypi) {
  for (const Row& row : kPypi) {
    check(Ecosystem::Pypi, row);
  }
}

// A PyPI file's own name, for its own upload time (docs/packages.md#the-age-rule): as the URL
// spells it once decoded, without a PEP 658 ".metadata" and the query; other kinds have none.
TEST(PackageRequest, PypiFileName) {
  const struct {
    std::string_view target;
    std::string_view file;
  } cases[] = {
      {"/packages/ab/cd/Foo_Bar-1.0-py3-none-any.whl", "Foo_Bar-1.0-py3-none-any.whl"},
      {"/packages/ab/cd/foo_bar-1.0-py3-none-any.whl.metadata", "foo_bar-1.0-py3-none-any.whl"},
      {"/packages/ab/cd/foo_bar-1.0.tar.gz?x=1", "foo_bar-1.0.tar.gz"},
      {"/packages/ab/cd/foo%5Fbar-1.0.tar.gz", "foo_bar-1.0.tar.gz"},
      {"/simple/foo-bar/", ""},
      {"/pypi/foo-bar/1.0/json", ""},
  };
  RegistrySettings registry;
  registry.ecosystem = Ecosystem::Pypi;
  registry.path = "/";
  for (const auto& c : cases) {
    EXPECT_EQ(recognizePackageRequest(registry, "GET", c.target).file, c.file) << c.target;
  }
  registry.ecosystem = Ecosystem::Npm;
  EXPECT_EQ(recognizePackageRequest(registry, "GET", "/left-pad/-/left-pad-1.0.0.tgz").file, "");
}

}  // namespace
}  // namespace sluice::policy
