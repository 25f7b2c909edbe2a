// A real OpenID Provider for the sign-in tests: the npm package `oidc-provider` (a certified
// OP), configured as an organisation's identity provider would be for toolgate.
//
//   node oidc_provider.mjs PORT RESOURCE [CONSOLE_REDIRECT]
//
// - resource indicators (RFC 8707): JWT access tokens whose `aud` is the resource asked for,
//   carrying toolgate's tier scopes and the person's groups, name and email;
// - dynamic client registration (RFC 7591), which the MCP Python SDK uses;
// - the development interaction form (a login form, then a consent form) that the tests fill
//   in headlessly; any password signs a known user in;
// - signing keys it makes itself at start (never the package's development keys);
// - a client registered with the name `short-lived` gets access tokens that live 2 seconds
//   (the expiry test);
// - with CONSOLE_REDIRECT, a confidential client `toolgate-console` (secret
//   `console-secret`) for the approver's console sign-in.
// Prints `issuer: URL` once it listens. Binds 127.0.0.1 only.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import path from 'node:path';
import { createRequire } from 'node:module';

const [port, resource, consoleRedirect] = process.argv.slice(2);
if (!port || !resource) {
  console.error('usage: oidc_provider.mjs PORT RESOURCE [CONSOLE_REDIRECT]');
  process.exit(2);
}
// Installed by install_clients.sh into $MCP_CLIENTS_DIR/oidc.
const dir = process.env.OIDC_PROVIDER_DIR || path.join(process.env.MCP_CLIENTS_DIR || '/tmp/mcp-clients', 'oidc');
const require = createRequire(path.join(dir, 'package.json'));
const { default: Provider, errors } = await import(require.resolve('oidc-provider'));

const issuer = `http://127.0.0.1:${port}`;
const TIER_SCOPES = 'toolgate:readonly toolgate:operator toolgate:supervised';
// The people of this organisation and the groups its directory puts them in.
const people = {
  ana: { name: 'Ana Example', email: 'ana@example.com', groups: ['fleet-viewers'] },
  omar: { name: 'Omar Ops', email: 'omar@example.com', groups: ['fleet-ops'] },
  rhea: { name: 'Rhea Reviewer', email: 'rhea@example.com', groups: ['fleet-admins'] },
};

// RS256 first: ID tokens default to it; access tokens for toolgate are ES256.
function signingKeys() {
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  return [
    { ...rsa.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256', use: 'sig' },
    { ...ec.export({ format: 'jwk' }), kid: randomUUID(), alg: 'ES256', use: 'sig' },
  ];
}

const clients = [];
if (consoleRedirect) {
  clients.push({
    client_id: 'toolgate-console',
    client_secret: 'console-secret',
    redirect_uris: [consoleRedirect],
    grant_types: ['authorization_code'],
    response_types: ['code'],
  });
}

const provider = new Provider(issuer, {
  clients,
  jwks: { keys: signingKeys() },
  // The tier scopes too: the SDK registers asking for the one it was challenged with.
  scopes: ['openid', 'offline_access', 'profile', 'email', 'groups', ...TIER_SCOPES.split(' ')],
  claims: { profile: ['name', 'preferred_username'], email: ['email'], groups: ['groups'] },
  pkce: { required: () => true },
  // A client registered for one tier scope may ask for the others too, as an organisation's
  // IdP lets it: MCP's step-up (SEP-2350) asks for the scopes held plus the one a 403 names.
  // (The validator runs on every registration; any extra property would do to get it run.)
  extraClientMetadata: {
    properties: ['toolgate_tiers'],
    validator(ctx, key, value, metadata) {
      if (metadata.scope) {
        metadata.scope = [...new Set([...metadata.scope.split(' '), ...TIER_SCOPES.split(' ')])].join(' ');
      }
    },
  },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator, client) => {
        if (!/^https?:\/\//.test(indicator)) throw new errors.InvalidTarget();
        return {
          scope: TIER_SCOPES,
          audience: indicator,
          accessTokenTTL: client?.clientName === 'short-lived' ? 2 : 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
  async findAccount(ctx, id) {
    if (!people[id]) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, ...people[id] };
      },
    };
  },
  async extraTokenClaims(ctx, token) {
    const person = people[token.accountId];
    if (!person) return undefined;
    return { groups: person.groups, name: person.name, email: person.email, preferred_username: token.accountId };
  },
  ttl: { Session: 3600, Grant: 3600, Interaction: 600, AuthorizationCode: 60, IdToken: 600, RefreshToken: 3600 },
});

// Why a request was refused, on standard error, for a test that fails.
for (const event of ['authorization.error', 'grant.error', 'registration_create.error', 'server_error']) {
  provider.on(event, (ctx, error) => console.error(`${event}: ${error.message} ${error.error_detail || ''}`));
}

provider.listen(Number(port), '127.0.0.1', () => {
  console.log(`issuer: ${issuer}`);
});
