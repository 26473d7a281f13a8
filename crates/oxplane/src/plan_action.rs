//! The server's plan endpoint, `POST /oxplane/v1alpha1/plan` (what `oxplane diff` asks): the
//! composition engine's dry-run plan of a composite resource or claim, made with the running
//! core's functions. A server whose controllers run elsewhere (another replica leads) has no
//! functions to run and says so with 503.

use std::sync::{Arc, RwLock};

use oxplane_apiserver::http::extensions::{ACTIONS_PATH, Action, Extensions};
use oxplane_apiserver::status::{ApiError, Reason};
use oxplane_composition::composite::plan::{self, PlanError};
use oxplane_composition::packages::FunctionRegistry;
use oxplane_runtime::Runtime;

/// The action's name under [`ACTIONS_PATH`].
pub const PLAN: &str = "plan";

/// The path plans are asked at.
pub fn path() -> String {
    format!("{ACTIONS_PATH}/{PLAN}")
}

/// The functions of the core running here, once it runs.
#[derive(Clone, Default)]
pub struct Planner {
    functions: Arc<RwLock<Option<Arc<FunctionRegistry>>>>,
}

impl Planner {
    /// Registers the plan action on a server's extensions; plans are made with `runtime`'s
    /// client once [`Planner::set`] gives them functions.
    pub fn register(extensions: &Extensions, runtime: Runtime) -> Planner {
        let planner = Planner::default();
        let functions = planner.functions.clone();
        let action: Action = Arc::new(move |object| {
            let runtime = runtime.clone();
            let functions = functions.read().unwrap_or_else(|p| p.into_inner()).clone();
            Box::pin(async move {
                let Some(functions) = functions else {
                    return Err(ApiError::new(
                        Reason::ServiceUnavailable,
                        "the controllers do not run on this server (another replica leads, or they are off): ask the leader for a plan",
                    ));
                };
                plan::plan(&runtime, &functions, &object).await.map_err(|error| match error {
                    PlanError::NotComposite(message) | PlanError::Refused(message) => ApiError::new(Reason::BadRequest, message),
                })
            })
        });
        extensions.add_action(PLAN, action);
        planner
    }

    /// Plans with the functions of the core that just started (`None`: it stopped).
    pub fn set(&self, functions: Option<Arc<FunctionRegistry>>) {
        *self.functions.write().unwrap_or_else(|p| p.into_inner()) = functions;
    }
}
