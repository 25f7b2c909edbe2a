//! The one `match` over the methods toolgate answers. Which era serves a method is data on
//! the method ([`Method::served_in`]); a method the request's era does not serve, or one we
//! do not know, is `-32601` (status 200 in the handshake era, 404 in 2026-07-28).

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use serde_json::Value;
use toolgate_domain::Caller;

use super::era::Era;
use super::incoming::Incoming;
use super::jsonrpc as rpc;
use super::{McpServer, Reply, completion, handshake, listen, lists, prompts, resources, stateless, tasks, tools_call};

/// The methods toolgate answers, in one era or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Initialize,
    Ping,
    ServerDiscover,
    ToolsList,
    ToolsCall,
    PromptsList,
    PromptsGet,
    ResourcesList,
    ResourcesTemplatesList,
    ResourcesRead,
    ResourcesSubscribe,
    ResourcesUnsubscribe,
    CompletionComplete,
    LoggingSetLevel,
    TasksGet,
    TasksUpdate,
    TasksCancel,
    SubscriptionsListen,
}

/// How many methods are counted by name in the metrics (`router::METHOD_LABELS`).
pub const METHOD_COUNT: usize = 17;

/// Each method's name on the wire, as the metrics count it. `initialize` is answered (it
/// opens the handshake era) but counted with the names we do not know, as it always was.
pub const METHOD_NAMES: [(&str, Method); METHOD_COUNT] = [
    ("ping", Method::Ping),
    ("server/discover", Method::ServerDiscover),
    ("tools/list", Method::ToolsList),
    ("tools/call", Method::ToolsCall),
    ("prompts/list", Method::PromptsList),
    ("prompts/get", Method::PromptsGet),
    ("resources/list", Method::ResourcesList),
    ("resources/templates/list", Method::ResourcesTemplatesList),
    ("resources/read", Method::ResourcesRead),
    ("resources/subscribe", Method::ResourcesSubscribe),
    ("resources/unsubscribe", Method::ResourcesUnsubscribe),
    ("completion/complete", Method::CompletionComplete),
    ("logging/setLevel", Method::LoggingSetLevel),
    ("tasks/get", Method::TasksGet),
    ("tasks/update", Method::TasksUpdate),
    ("tasks/cancel", Method::TasksCancel),
    ("subscriptions/listen", Method::SubscriptionsListen),
];

/// The era a method belongs to.
enum Served {
    Both,
    HandshakeOnly,
    StatelessOnly,
}

impl Method {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "initialize" => Some(Method::Initialize),
            _ => METHOD_NAMES.iter().find(|(n, _)| *n == name).map(|(_, m)| *m),
        }
    }

    fn served(self) -> Served {
        match self {
            // 2026-07-28 has no handshake, no ping, no subscriptions and no level to set: each
            // request carries what it needs.
            Method::Initialize
            | Method::Ping
            | Method::ResourcesSubscribe
            | Method::ResourcesUnsubscribe
            | Method::LoggingSetLevel => Served::HandshakeOnly,
            // Discovery, listening and the tasks extension are 2026-07-28's.
            Method::ServerDiscover
            | Method::SubscriptionsListen
            | Method::TasksGet
            | Method::TasksUpdate
            | Method::TasksCancel => Served::StatelessOnly,
            _ => Served::Both,
        }
    }

    pub fn served_in(self, era: &Era) -> bool {
        matches!(
            (self.served(), era),
            (Served::Both, _)
                | (Served::HandshakeOnly, Era::Handshake { .. })
                | (Served::StatelessOnly, Era::Stateless { .. })
        )
    }
}

fn method_not_found(status: StatusCode, id: &Value, method: &str) -> Reply {
    Reply::error(status, id, rpc::METHOD_NOT_FOUND, &format!("Method not found: {method}"), None)
}

/// One request, to the function that answers its method.
pub async fn dispatch(server: &Arc<McpServer>, caller: &Caller, headers: &HeaderMap, incoming: Incoming) -> Reply {
    let Incoming { id, method: name, params, era } = incoming;
    let Some(method) = Method::parse(&name).filter(|m| m.served_in(&era)) else {
        return method_not_found(era.not_found_status(), &id, &name);
    };
    let (id, p) = (&id, params.as_ref());
    // A choice of toolsets that names no toolset is refused whatever the method.
    if let Err(wrong) = super::chosen::requested(server.services.catalogue(), caller, headers) {
        return Reply::error(era.status(rpc::INVALID_PARAMS), id, rpc::INVALID_PARAMS, &wrong.to_string(), None);
    }
    match method {
        Method::Initialize => handshake::initialize(server, caller, headers, id, p).await,
        Method::Ping => Reply::json(StatusCode::OK, rpc::result_raw(id, "{}")),
        Method::ServerDiscover => stateless::discover(server, id),
        Method::LoggingSetLevel => handshake::set_log_level(server, caller, headers, id, p),
        Method::ToolsList => lists::list_tools(server, caller, headers, id, p, &era),
        Method::ToolsCall => tools_call::tools_call(server, caller, headers, id, params, &era).await,
        Method::PromptsList => prompts::list(server, caller, id, p, &era).await,
        Method::PromptsGet => prompts::get(server, caller, id, params, &era).await,
        Method::ResourcesList => resources::list(server, caller, id, p, &era).await,
        Method::ResourcesTemplatesList => resources::templates(server, caller, id, p, &era),
        Method::ResourcesRead => resources::read(server, caller, id, p, &era).await,
        Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
            let session_id = era.session().map(|s| s.id.as_str());
            resources::subscription(server, caller, id, p, session_id, method == Method::ResourcesSubscribe).await
        }
        Method::CompletionComplete => completion::complete(server, caller, id, p, &era).await,
        Method::SubscriptionsListen => listen::listen(server, caller, id, p, &era).await,
        Method::TasksGet => {
            tasks::answer_tasks_method(server, caller, id, tasks::TaskMethod::Get, p, era.client_capabilities())
        }
        Method::TasksUpdate => {
            tasks::answer_tasks_method(server, caller, id, tasks::TaskMethod::Update, p, era.client_capabilities())
        }
        Method::TasksCancel => {
            tasks::answer_tasks_method(server, caller, id, tasks::TaskMethod::Cancel, p, era.client_capabilities())
        }
    }
}
