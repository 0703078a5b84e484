#include "sim/kube/tls.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>
#include <vector>

namespace gpuop::simkube {
namespace {

struct Deleters {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleters>;
using CertPtr = std::unique_ptr<X509, Deleters>;
using BioPtr = std::unique_ptr<BIO, Deleters>;
using BnPtr = std::unique_ptr<BIGNUM, Deleters>;

Status SslError(const std::string& what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown error";
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return Internal("generating the emulator's TLS certificates: " + what + ": " + buf);
}

Result<KeyPtr> NewKey() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return SslError("EC key generation");
  return key;
}

bool IsIpAddress(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Adds one X509v3 extension given in OpenSSL's config syntax.
Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return SslError("extension " + value);
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return SslError("adding extension " + value);
  return Status::Ok();
}

// A certificate for `subject_cn` with a random positive serial, valid from an
// hour ago for a year, public key from `key`.
Result<CertPtr> NewCert(const std::string& subject_cn, EVP_PKEY* key) {
  CertPtr cert(X509_new());
  if (!cert) return SslError("X509_new");
  X509_set_version(cert.get(), 2);  // v3
  unsigned char serial_bytes[16];
  if (RAND_bytes(serial_bytes, sizeof(serial_bytes)) != 1) return SslError("random serial");
  serial_bytes[0] &= 0x7f;  // positive, as RFC 5280 requires
  BnPtr bn(BN_bin2bn(serial_bytes, sizeof(serial_bytes), nullptr));
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return SslError("serial number");
  }
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 365L * 24 * 3600);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("gpuop-sim"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(subject_cn.c_str()), -1, -1, 0);
  if (X509_set_pubkey(cert.get(), key) != 1) return SslError("public key");
  return cert;
}

Result<std::string> CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return SslError("PEM of certificate");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<std::string> KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return SslError("PEM of private key");
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace

Result<TlsMaterial> GenerateServingCert(const std::string& host) {
  GPUOP_ASSIGN_OR_RETURN(KeyPtr ca_key, NewKey());
  GPUOP_ASSIGN_OR_RETURN(CertPtr ca, NewCert("gpuop-sim-ca", ca_key.get()));
  X509_set_issuer_name(ca.get(), X509_get_subject_name(ca.get()));
  GPUOP_RETURN_IF_ERROR(AddExt(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE"));
  GPUOP_RETURN_IF_ERROR(
      AddExt(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"));
  GPUOP_RETURN_IF_ERROR(AddExt(ca.get(), ca.get(), NID_subject_key_identifier, "hash"));
  if (X509_sign(ca.get(), ca_key.get(), EVP_sha256()) == 0) return SslError("signing the CA");

  GPUOP_ASSIGN_OR_RETURN(KeyPtr key, NewKey());
  GPUOP_ASSIGN_OR_RETURN(CertPtr cert, NewCert("gpuop-sim-apiserver", key.get()));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.get()));
  std::string san = "IP:127.0.0.1,IP:::1,DNS:localhost";
  if (!host.empty() && host != "127.0.0.1" && host != "::1" && host != "localhost" &&
      host != "0.0.0.0" && host != "::") {
    san += (IsIpAddress(host) ? ",IP:" : ",DNS:") + host;
  }
  GPUOP_RETURN_IF_ERROR(AddExt(cert.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE"));
  GPUOP_RETURN_IF_ERROR(
      AddExt(cert.get(), ca.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment"));
  GPUOP_RETURN_IF_ERROR(AddExt(cert.get(), ca.get(), NID_ext_key_usage, "serverAuth"));
  GPUOP_RETURN_IF_ERROR(AddExt(cert.get(), ca.get(), NID_authority_key_identifier, "keyid"));
  GPUOP_RETURN_IF_ERROR(AddExt(cert.get(), ca.get(), NID_subject_alt_name, san));
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) {
    return SslError("signing the serving certificate");
  }

  TlsMaterial out;
  GPUOP_ASSIGN_OR_RETURN(out.ca_cert_pem, CertPem(ca.get()));
  GPUOP_ASSIGN_OR_RETURN(out.cert_pem, CertPem(cert.get()));
  GPUOP_ASSIGN_OR_RETURN(out.key_pem, KeyPem(key.get()));
  return out;
}

std::string Base64Encode(const std::string& data) {
  if (data.empty()) return "";
  std::vector<unsigned char> out(4 * ((data.size() + 2) / 3) + 1);
  int n = EVP_EncodeBlock(out.data(), reinterpret_cast<const unsigned char*>(data.data()),
                          static_cast<int>(data.size()));
  return std::string(reinterpret_cast<const char*>(out.data()), static_cast<size_t>(n));
}

}  // namespace gpuop::simkube
