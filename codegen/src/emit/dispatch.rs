//! `ToolId` -> handler call. Rust handlers get their typed arguments; builtins need none.

use proc_macro2::TokenStream;
use quote::quote;

use super::paths;
use super::registry::ident;
use crate::rules::{Checked, Handler};

/// A plain function returning the handler's future, boxed: an `async fn` with one `.await` per
/// tool compiles into one state machine with N suspend points, which took rustc past 15 GiB
/// for a 10,000-tool catalogue. The builtins share one arm each.
pub fn emit(checked: &Checked) -> TokenStream {
    let (handlers, context, result, typed) =
        (paths::handlers(), paths::tool_context(), paths::tool_result(), paths::typed_arguments());
    let of = |wanted: fn(&Handler) -> bool| -> Vec<proc_macro2::Ident> {
        checked.plans.iter().filter(|p| wanted(&p.handler)).map(|p| ident(&p.struct_name)).collect()
    };
    let echo = of(|h| matches!(h, Handler::Echo));
    let statics = of(|h| matches!(h, Handler::Static));
    let mut arms = Vec::new();
    if !echo.is_empty() {
        arms.push(quote!(#(ToolId::#echo)|* => Box::pin(#handlers::builtin::echo(ctx, arguments)),));
    }
    if !statics.is_empty() {
        let ready = quote!(std::future::ready(#handlers::builtin::static_result(tool.meta())));
        arms.push(quote!(#(ToolId::#statics)|* => Box::pin(#ready),));
    }
    for plan in &checked.plans {
        if let Handler::Rust { module, function } = &plan.handler {
            let id = ident(&plan.struct_name);
            let path = module.iter().map(|m| ident(m));
            let function = ident(function);
            arms.push(quote! {
                ToolId::#id => Box::pin(async move {
                    let args = #typed::<args::#id>(arguments)?;
                    #handlers::#(#path::)*#function(ctx, args).await
                }),
            });
        }
    }
    quote! {
        /// Runs the tool's handler. The gate has already checked tier, RBAC, approval and the
        /// arguments against the inputSchema before this is called.
        pub fn dispatch<'a>(
            tool: ToolId,
            ctx: &'a #context,
            arguments: serde_json::Value,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = #result> + Send + 'a>> {
            match tool { #(#arms)* }
        }
    }
}

/// `pub mod area;` for each handler module the catalogue uses, and no other: a catalogue
/// built with TOOLGATE_TOOLS compiles without the shipped handlers it does not name.
pub fn modules(checked: &Checked, handlers_dir: &str) -> TokenStream {
    let mut used: Vec<&str> = checked
        .plans
        .iter()
        .filter_map(|p| match &p.handler {
            Handler::Rust { module, .. } => Some(module[0].as_str()),
            _ => None,
        })
        .collect();
    used.sort_unstable();
    used.dedup();
    let dir = std::path::Path::new(handlers_dir);
    let decls = used.iter().map(|m| {
        let file =
            if dir.join(format!("{m}.rs")).exists() { dir.join(format!("{m}.rs")) } else { dir.join(m).join("mod.rs") };
        let path = file.display().to_string();
        let m = ident(m);
        quote!(#[path = #path] pub mod #m;)
    });
    quote!(#(#decls)*)
}
