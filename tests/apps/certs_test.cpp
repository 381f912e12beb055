// `troupe certs`, checked with OpenSSL directly: every host certificate chains
// to the cluster CA it made (X509_verify_cert) and not to another one, names
// its host as a subject alternative name (IP or DNS) and is good for both TLS
// roles, keys are 0600 and match their certificates; nothing is replaced
// without --force; a later run signs new hosts with the CA already there.
#include <gtest/gtest.h>

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/run_troupe.hpp"

namespace troupe::tests {
namespace {

using troupe::testing::run_troupe;

X509* read_cert(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return nullptr;
  X509* c = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  return c;
}

EVP_PKEY* read_key(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return nullptr;
  EVP_PKEY* k = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  return k;
}

/// X509_verify_cert of `cert` against `ca` alone, for `purpose` (X509_PURPOSE_SSL_SERVER, ...).
int verify(X509* cert, X509* ca, int purpose) {
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, cert, nullptr);
  X509_STORE_CTX_set_purpose(ctx, purpose);
  const int ok = X509_verify_cert(ctx);
  const int err = X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return ok == 1 ? X509_V_OK : (err == X509_V_OK ? -1 : err);
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Certs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/troupe_certs_test_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(Certs, HostCertificatesChainToTheClusterCaAndNameTheirHosts) {
  auto r = run_troupe("certs --out " + dir_ + " --hosts 10.0.0.5,node-1.example,fd00::7");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  X509* ca = read_cert(dir_ + "/ca.pem");
  ASSERT_NE(ca, nullptr);
  EXPECT_EQ(X509_check_ca(ca), 1);
  struct Host {
    std::string name, stem;
    bool ip;
  };
  for (const Host& h : {Host{"10.0.0.5", "10.0.0.5", true}, Host{"node-1.example", "node-1.example", false},
                        Host{"fd00::7", "fd00__7", true}}) {
    SCOPED_TRACE(h.name);
    const std::string cert_path = dir_ + "/" + h.stem + ".pem", key_path = dir_ + "/" + h.stem + "-key.pem";
    X509* cert = read_cert(cert_path);
    ASSERT_NE(cert, nullptr);
    EXPECT_EQ(verify(cert, ca, X509_PURPOSE_SSL_SERVER), X509_V_OK);
    EXPECT_EQ(verify(cert, ca, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
    EXPECT_EQ(X509_check_ca(cert), 0) << "a host certificate must not be a CA";
    if (h.ip) {
      EXPECT_EQ(X509_check_ip_asc(cert, h.name.c_str(), 0), 1);
      EXPECT_NE(X509_check_ip_asc(cert, "10.0.0.6", 0), 1);
    } else {
      EXPECT_EQ(X509_check_host(cert, h.name.c_str(), 0, 0, nullptr), 1);
      EXPECT_NE(X509_check_host(cert, "node-2.example", 0, 0, nullptr), 1);
    }
    EVP_PKEY* key = read_key(key_path);
    ASSERT_NE(key, nullptr);
    EXPECT_EQ(X509_check_private_key(cert, key), 1);
    EXPECT_EQ(mode_of(key_path), 0600u);
    EVP_PKEY_free(key);
    X509_free(cert);
  }
  EXPECT_EQ(mode_of(dir_ + "/ca-key.pem"), 0600u);
  X509_free(ca);
}

TEST_F(Certs, ACertificateOfAnotherClusterDoesNotVerify) {
  ASSERT_EQ(run_troupe("certs --out " + dir_ + "/a --hosts 127.0.0.1").exit_code, 0);
  ASSERT_EQ(run_troupe("certs --out " + dir_ + "/b --hosts 127.0.0.1").exit_code, 0);
  X509* ca_a = read_cert(dir_ + "/a/ca.pem");
  X509* host_b = read_cert(dir_ + "/b/127.0.0.1.pem");
  ASSERT_TRUE(ca_a && host_b);
  EXPECT_NE(verify(host_b, ca_a, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
  X509_free(ca_a);
  X509_free(host_b);
}

TEST_F(Certs, NothingIsReplacedWithoutForceAndNewHostsReuseTheCa) {
  ASSERT_EQ(run_troupe("certs --out " + dir_ + " --hosts 127.0.0.1").exit_code, 0);
  const std::string ca_before = slurp(dir_ + "/ca.pem"), host_before = slurp(dir_ + "/127.0.0.1.pem");
  auto again = run_troupe("certs --out " + dir_ + " --hosts 127.0.0.1");
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("127.0.0.1.pem exists already"), std::string::npos) << again.err;
  EXPECT_EQ(slurp(dir_ + "/ca.pem"), ca_before);
  EXPECT_EQ(slurp(dir_ + "/127.0.0.1.pem"), host_before);
  // A host added later is signed by the CA already there.
  auto more = run_troupe("certs --out " + dir_ + " --hosts 127.0.0.2");
  ASSERT_EQ(more.exit_code, 0) << more.err;
  EXPECT_EQ(slurp(dir_ + "/ca.pem"), ca_before);
  X509* ca = read_cert(dir_ + "/ca.pem");
  X509* added = read_cert(dir_ + "/127.0.0.2.pem");
  ASSERT_TRUE(ca && added);
  EXPECT_EQ(verify(added, ca, X509_PURPOSE_SSL_SERVER), X509_V_OK);
  X509_free(added);
  X509_free(ca);
  // --force makes a new CA and replaces the files, keys still 0600.
  ::chmod((dir_ + "/127.0.0.1-key.pem").c_str(), 0644);
  auto forced = run_troupe("certs --out " + dir_ + " --hosts 127.0.0.1 --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(slurp(dir_ + "/ca.pem"), ca_before);
  EXPECT_NE(slurp(dir_ + "/127.0.0.1.pem"), host_before);
  EXPECT_EQ(mode_of(dir_ + "/127.0.0.1-key.pem"), 0600u);
}

TEST_F(Certs, BadArgumentsAreRefused) {
  auto none = run_troupe("certs --out " + dir_);
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("--hosts"), std::string::npos) << none.err;
  auto bad = run_troupe("certs --out " + dir_ + " --hosts 'bad host'");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("neither an IP address nor a DNS name"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/ca.pem"));
}

}  // namespace
}  // namespace troupe::tests
