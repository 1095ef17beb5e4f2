'use strict'
// Test helper for node/rail: decodes BOLT11 invoices with the npm `bolt11`
// package, an implementation independent of the Go code under test, and
// prints what it found as JSON for the Go test to compare.
//
// Input: one payment request per line on stdin.
// Output: a JSON array with one object per input line, in order.
const bolt11 = require('bolt11')

function tagData (decoded, name) {
  const tag = decoded.tags.find((t) => t.tagName === name)
  return tag === undefined ? null : tag.data
}

function describe (paymentRequest) {
  try {
    const d = bolt11.decode(paymentRequest)
    const features = tagData(d, 'feature_bits')
    return {
      ok: true,
      prefix: d.prefix,
      bech32Currency: d.network.bech32,
      millisatoshis: d.millisatoshis, // decimal string, or null for any amount
      timestamp: d.timestamp,
      timeExpireDate: d.timeExpireDate === undefined ? null : d.timeExpireDate,
      payeeNodeKey: d.payeeNodeKey,
      paymentHash: tagData(d, 'payment_hash'),
      paymentSecret: tagData(d, 'payment_secret'),
      description: tagData(d, 'description'),
      expireTime: tagData(d, 'expire_time'),
      minFinalCltvExpiry: tagData(d, 'min_final_cltv_expiry'),
      varOnionOptinRequired: features ? features.var_onion_optin.required : false,
      paymentSecretRequired: features ? features.payment_secret.required : false,
      unknownRequiredFeatures: features ? features.extra_bits.has_required : false
    }
  } catch (err) {
    return { ok: false, error: String((err && err.message) || err) }
  }
}

const lines = require('fs').readFileSync(0, 'utf8').split('\n')
const results = lines.map((l) => l.trim()).filter((l) => l !== '').map(describe)
process.stdout.write(JSON.stringify(results) + '\n')
